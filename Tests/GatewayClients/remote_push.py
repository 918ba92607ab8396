"""Sends one alert push with aioapns to a Tidings gateway on loopback, for TidingsRemoteTests.

usage: remote_push.py HOST PORT CERT P8 KEY_ID TEAM_ID TOPIC TOKEN [PAYLOAD_JSON_FILE]
Prints one JSON object: status, apns_id, reason.
"""
import asyncio
import json
import ssl
import sys
import uuid


async def main(host, port, cert, p8, key_id, team_id, topic, token, payload_file=None):
    from aioapns import APNs, NotificationRequest, PushType
    from aioapns.connection import APNsDevelopmentClientProtocol

    ctx = ssl.create_default_context(cafile=cert)
    client = APNs(key=open(p8).read(), key_id=key_id, team_id=team_id, topic=topic, use_sandbox=True, ssl_context=ctx)
    client.pool.protocol_class = type("Local", (APNsDevelopmentClientProtocol,), {"APNS_SERVER": host, "APNS_PORT": int(port)})
    message = {"aps": {"alert": {"title": "From aioapns", "body": "Tap me"}, "sound": "default"}, "orderID": "42"}
    if payload_file:
        with open(payload_file) as f:
            message = json.load(f)
    request = NotificationRequest(
        device_token=token,
        message=message,
        notification_id=str(uuid.uuid4()), push_type=PushType.ALERT)
    result = await client.send_notification(request)
    print(json.dumps({"status": str(result.status), "apns_id": result.notification_id, "reason": result.description}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
