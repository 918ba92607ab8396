#!/usr/bin/env python3
"""Provider side of the end-to-end encryption recipe (docs/service-extensions.md).

Prints the APNs payload for an alert sealed with AES-256-GCM under the key shared with the
app (e2e.key: base64 of 32 bytes). Needs the `cryptography` package (pip install cryptography).

    python3 encrypt_push.py e2e.key "Alice" "See you at 8?"
"""
import base64
import json
import os
import sys

from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def sealed_payload(key: bytes, title: str, body: str) -> dict:
    nonce = os.urandom(12)
    plaintext = json.dumps({"title": title, "body": body}).encode()
    sealed = nonce + AESGCM(key).encrypt(nonce, plaintext, None)  # ciphertext ‖ 16-byte tag
    return {
        "aps": {"alert": {"title": "New message", "body": "(encrypted)"}, "mutable-content": 1},
        "e2e": base64.b64encode(sealed).decode(),
    }


if __name__ == "__main__":
    key_file, title, body = sys.argv[1:4]
    with open(key_file) as f:
        key = base64.b64decode(f.read().strip())
    print(json.dumps(sealed_payload(key, title, body)))
