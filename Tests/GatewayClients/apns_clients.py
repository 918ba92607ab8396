"""Third-party APNs clients against a Tidings gateway on loopback, for TidingsGatewayTests.

usage: apns_clients.py (aioapns|httpx) HOST PORT CERT P8 KEY_ID TEAM_ID TOPIC TOKEN
Prints one JSON object per request on stdout.
"""
import asyncio
import json
import ssl
import sys
import time
import uuid


def out(**fields):
    print(json.dumps(fields), flush=True)


async def run_aioapns(host, port, cert, p8, key_id, team_id, topic, token):
    from aioapns import APNs, NotificationRequest, PushType
    from aioapns.connection import APNsDevelopmentClientProtocol

    # aioapns offers no ALPN by default: keep it that way, only trust the gateway's certificate.
    ctx = ssl.create_default_context(cafile=cert)
    client = APNs(key=open(p8).read(), key_id=key_id, team_id=team_id, topic=topic, use_sandbox=True, ssl_context=ctx)
    client.pool.protocol_class = type("Local", (APNsDevelopmentClientProtocol,), {"APNS_SERVER": host, "APNS_PORT": int(port)})
    requests = [
        ("success", NotificationRequest(device_token=token, message={"aps": {"alert": {"title": "aioapns", "body": "hello"}, "badge": 1}},
                                        notification_id=str(uuid.uuid4()), push_type=PushType.ALERT)),
        ("collapse", NotificationRequest(device_token=token, message={"aps": {"alert": "second"}}, collapse_key="c1",
                                         priority=5, time_to_live=60, push_type=PushType.ALERT)),
        ("bad_token", NotificationRequest(device_token="ab" * 32, message={"aps": {"alert": "x"}}, push_type=PushType.ALERT)),
        ("too_large", NotificationRequest(device_token=token, message={"aps": {"alert": "x" * 5000}}, push_type=PushType.ALERT)),
    ]
    for name, request in requests:
        result = await client.send_notification(request)
        out(case=name, status=str(result.status), apns_id=result.notification_id, reason=result.description,
            sent_id=request.notification_id)


def run_httpx(host, port, cert, p8, key_id, team_id, topic, token):
    import httpx
    import jwt

    bearer = jwt.encode({"iss": team_id, "iat": int(time.time())}, open(p8).read(), algorithm="ES256", headers={"kid": key_id})
    base = f"https://{host}:{port}"
    headers = {"authorization": f"bearer {bearer}", "apns-topic": topic, "apns-push-type": "alert"}
    with httpx.Client(http2=True, verify=cert) as client:
        def send(name, path, body, extra=None, method="POST"):
            h = dict(headers)
            h.update(extra or {})
            r = client.request(method, base + path, headers=h, content=body)
            reason = None
            if r.content:
                reason = r.json().get("reason")
            out(case=name, status=r.status_code, http_version=r.http_version, apns_id=r.headers.get("apns-id"), reason=reason,
                body=r.text)
        apns_id = str(uuid.uuid4()).upper()
        send("success", f"/3/device/{token}", b'{"aps":{"alert":"httpx"}}', {"apns-id": apns_id, "apns-priority": "10"})
        out(case="sent_id", apns_id=apns_id)
        send("bad_token", "/3/device/" + "cd" * 32, b'{"aps":{"alert":"x"}}')
        send("empty_topic", f"/3/device/{token}", b"{}", {"apns-topic": ""})
        send("bad_priority", f"/3/device/{token}", b'{"aps":{}}', {"apns-priority": "3"})
        send("payload_empty", f"/3/device/{token}", b"")
        send("bad_path", "/4/device/" + token, b"{}")
        send("method", f"/3/device/{token}", None, method="GET")


def main():
    which, *args = sys.argv[1:]
    if which == "aioapns":
        asyncio.run(run_aioapns(*args))
    elif which == "httpx":
        run_httpx(*args)
    else:
        sys.exit("unknown client " + which)


if __name__ == "__main__":
    main()
