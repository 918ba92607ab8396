"""Certificate-only APNs clients (mutual TLS) against a Tidings gateway on loopback, for
TidingsGatewayTests.ThirdPartyClientTests.

usage:
  certificate_clients.py aapns HOST PORT CA CLIENT_PEM TOPIC TOKEN OTHER_TOPIC
      success (no apns-topic: the certificate's), voip, bad device token, a topic the
      certificate does not name
  certificate_clients.py aapns-once HOST PORT CA CLIENT_PEM TOKEN
      one push, no topic (a certificate for the other environment)
  certificate_clients.py pkcs12 P12 PASSWORD
      the .p12 as Python cryptography reads it
Prints one JSON object per case on stdout.
"""
import asyncio
import json
import sys


def out(**fields):
    print(json.dumps(fields), flush=True)


async def send(client, name, token, notification, **options):
    from aapns.errors import ResponseError

    try:
        apns_id = await client.send_notification(token, notification, **options)
        out(case=name, status=200, apns_id=apns_id)
    except ResponseError as error:
        out(case=name, status="error", reason=error.reason, apns_id=error.apns_id)


async def run_aapns(host, port, ca, client_pem, topic, token, other_topic):
    from aapns.api import Server
    from aapns.models import Alert, Notification, PushType

    # aapns speaks certificates only; it omits apns-topic unless given one.
    client = await Server(client_cert_path=client_pem, host=host, port=int(port), ca_file=ca).create_client()
    try:
        await send(client, "success", token, Notification(alert=Alert(title="aapns", body="by certificate"), badge=3))
        await send(client, "voip", token, Notification(alert=Alert(body="call"), push_type=PushType.voip), topic=topic + ".voip")
        await send(client, "bad_token", "ab" * 32, Notification(alert=Alert(body="x")))
        await send(client, "other_topic", token, Notification(alert=Alert(body="x")), topic=other_topic)
    finally:
        await client.close()


async def run_aapns_once(host, port, ca, client_pem, token):
    from aapns.api import Server
    from aapns.models import Alert, Notification

    client = await Server(client_cert_path=client_pem, host=host, port=int(port), ca_file=ca).create_client()
    try:
        await send(client, "once", token, Notification(alert=Alert(body="x")))
    finally:
        await client.close()


def run_pkcs12(path, password):
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    key, certificate, additional = pkcs12.load_key_and_certificates(open(path, "rb").read(), password.encode())
    uid = certificate.subject.get_attributes_for_oid(NameOID.USER_ID)[0].value
    out(case="pkcs12", key_size=key.key_size, uid=uid, subject=certificate.subject.rfc4514_string(),
        matches=key.public_key().public_numbers() == certificate.public_key().public_numbers(), additional=len(additional))
    try:
        pkcs12.load_key_and_certificates(open(path, "rb").read(), b"not the password")
        out(case="wrong_password", refused=False)
    except ValueError:
        out(case="wrong_password", refused=True)


def main():
    which, *args = sys.argv[1:]
    if which == "aapns":
        asyncio.run(run_aapns(*args))
    elif which == "aapns-once":
        asyncio.run(run_aapns_once(*args))
    elif which == "pkcs12":
        run_pkcs12(*args)
    else:
        sys.exit("unknown client " + which)


if __name__ == "__main__":
    main()
