"""PyPI APNs clients with token (.p8) authentication against a Tidings gateway on loopback,
for TidingsGatewayTests (ThirdPartyClientTests). Each is pointed at the gateway as
docs/clients.md says, and otherwise used as its README shows.

usage: token_clients.py (pyapns-client|apns2|gobiko-apns|kalyke-apns) HOST PORT CERT P8 KEY_ID TEAM_ID TOPIC TOKEN
Prints one JSON object per request on stdout: case, status (where the library exposes it),
reason (the library's exception class name, which is Apple's reason), and for the success
case the apns-id where the library returns it.
"""
import asyncio
import json
import os
import sys
import uuid

# Another app's bundle id: not the token's team's, so TopicDisallowed.
OTHER_TOPIC = "com.example.not-this-team"
LARGE = "x" * 5000  # past the 4096-byte payload limit


def out(**fields):
    print(json.dumps(fields), flush=True)


def outcome(case, call):
    """Runs `call`; prints success, or the exception the library raised (its class name is the reason)."""
    try:
        result = call()
    except Exception as error:  # the libraries raise one class per APNs reason
        out(case=case, reason=type(error).__name__.removesuffix("Exception"),
            status=getattr(error, "status_code", None), module=type(error).__module__)
        return None
    out(case=case, status=200, result=result if isinstance(result, (str, int, dict, type(None))) else repr(result))
    return result


def run_pyapns_client(host, port, cert, p8, key_id, team_id, topic, token):
    # pyapns-client takes the CA file as `root_cert_path`; the host is the class's BASE_URLS.
    from pyapns_client import APNSClient, IOSNotification, IOSPayload, IOSPayloadAlert

    class TidingsAPNSClient(APNSClient):
        BASE_URLS = {APNSClient.MODE_DEV: f"https://{host}:{port}", APNSClient.MODE_PROD: f"https://{host}:{port}"}

    client = TidingsAPNSClient(mode=APNSClient.MODE_DEV, root_cert_path=cert, auth_key_path=p8, auth_key_id=key_id, team_id=team_id)

    def push(case, device_token, payload, **notification):
        outcome(case, lambda: client.push(IOSNotification(payload=payload, topic=notification.pop("topic", topic), **notification),
                                          device_token=device_token))

    alert = IOSPayload(alert=IOSPayloadAlert(title="pyapns-client", body="hello"), badge=1)
    push("success", token, alert, apns_id=str(uuid.uuid4()), push_type=IOSNotification.PUSH_TYPE_ALERT)
    push("bad_token", "ab" * 32, alert, push_type="alert")
    # pyapns-client shortens a long alert body to 2048 bytes by itself: a custom key is sent as given.
    push("too_large", token, IOSPayload(alert=IOSPayloadAlert(body="x"), custom={"blob": LARGE}), push_type="alert")
    push("bad_topic", token, alert, topic=OTHER_TOPIC, push_type="alert")
    push("bad_collapse_id", token, alert, collapse_id="c" * 65, push_type="alert")
    client.close()


def run_apns2(host, port, cert, p8, key_id, team_id, topic, token):
    # apns2 (apns2-up on PyPI) connects through hyper: the host and port are class attributes of
    # APNsClient; trust comes from SSL_CERT_FILE (hyper's context loads the default verify paths).
    os.environ["SSL_CERT_FILE"] = cert  # as `export SSL_CERT_FILE=<data-dir>/tls/gateway-cert.pem` does
    from apns2.client import APNsClient, Notification, NotificationPriority, NotificationType
    from apns2.credentials import TokenCredentials
    from apns2.payload import Payload, PayloadAlert

    class TidingsAPNsClient(APNsClient):
        SANDBOX_SERVER = host
        DEFAULT_PORT = int(port)

    client = TidingsAPNsClient(credentials=TokenCredentials(auth_key_path=p8, auth_key_id=key_id, team_id=team_id), use_sandbox=True)
    payload = Payload(alert=PayloadAlert(title="apns2", body="hello"), badge=1)
    outcome("success", lambda: client.send_notification(token, payload, topic))
    outcome("bad_token", lambda: client.send_notification("ab" * 32, payload, topic))
    outcome("too_large", lambda: client.send_notification(token, Payload(alert="x", custom={"blob": LARGE}), topic))
    outcome("bad_topic", lambda: client.send_notification(token, payload, OTHER_TOPIC))
    outcome("bad_collapse_id", lambda: client.send_notification(token, payload, topic, collapse_id="c" * 65))
    # A batch on the one connection, as many streams at once as the gateway's SETTINGS allow.
    results = client.send_notification_batch([Notification(token=token, payload=Payload(alert="batch", sound="default")),
                                              Notification(token="cd" * 32, payload=payload)],
                                             topic, priority=NotificationPriority.Delayed, push_type=NotificationType.Alert)
    out(case="batch", results=results)


def run_gobiko_apns(host, port, cert, p8, key_id, team_id, topic, token):
    # gobiko-apns connects through hyper (trust from SSL_CERT_FILE, as for apns2) to `self.host`,
    # `host:port`; hyper uses TLS only on port 443 unless told, so the subclass says `secure=True`.
    os.environ["SSL_CERT_FILE"] = cert
    from gobiko.apns import APNsClient
    from hyper import HTTP20Connection

    class TidingsAPNsClient(APNsClient):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.host = f"{host}:{port}"

        def _create_connection(self):
            return HTTP20Connection(self.host, secure=True, force_proto=self.force_proto)

    client = TidingsAPNsClient(team_id=team_id, bundle_id=topic, auth_key_id=key_id, auth_key_filepath=p8, use_sandbox=True)
    outcome("success", lambda: client.send_message(token, {"title": "gobiko-apns", "body": "hello"}, badge=1, sound="default"))
    outcome("bad_token", lambda: client.send_message("ab" * 32, "x"))
    # gobiko-apns refuses a payload over 4096 bytes itself, before any request: the gateway never sees it.
    outcome("too_large", lambda: client.send_message(token, LARGE))
    outcome("bad_topic", lambda: client.send_message(token, "x", topic=OTHER_TOPIC))
    outcome("bad_priority", lambda: client.send_message(token, "x", priority=3))
    outcome("bad_expiration", lambda: client.send_message(token, "x", expiration="soon"))


def run_kalyke_apns(host, port, cert, p8, key_id, team_id, topic, token):
    # kalyke-apns (httpx2) trusts SSL_CERT_FILE; its host is the `_base_url` property.
    os.environ["SSL_CERT_FILE"] = cert
    from dataclasses import dataclass
    from kalyke import ApnsClient, ApnsConfig, Payload, PayloadAlert

    @dataclass(frozen=True)
    class TidingsApnsClient(ApnsClient):
        @property
        def _base_url(self):
            return f"https://{host}:{port}"

    client = TidingsApnsClient(use_sandbox=True, team_id=team_id, auth_key_id=key_id, auth_key_filepath=p8)
    payload = Payload(alert=PayloadAlert(title="kalyke-apns", body="hello"), badge=1)

    async def send(case, device_token, body, **config):
        try:
            apns_id = await client.send_message(device_token=device_token, payload=body,
                                                apns_config=ApnsConfig(topic=config.pop("topic", topic), **config))
        except Exception as error:
            out(case=case, reason=type(error).__name__, module=type(error).__module__, error=getattr(error, "error", None))
            return
        out(case=case, status=200, apns_id=apns_id)

    async def main():
        sent_id = str(uuid.uuid4())
        await send("success", token, payload, identifier=sent_id)
        out(case="sent_id", apns_id=sent_id)
        await send("bad_token", "ab" * 32, payload)
        await send("too_large", token, {"aps": {"alert": "x"}, "blob": LARGE})
        await send("bad_topic", token, payload, topic=OTHER_TOPIC)
        await send("bad_collapse_id", token, payload, collapse_id="c" * 65)

    asyncio.run(main())


def main():
    which, *args = sys.argv[1:]
    runners = {"pyapns-client": run_pyapns_client, "apns2": run_apns2, "gobiko-apns": run_gobiko_apns, "kalyke-apns": run_kalyke_apns}
    if which not in runners:
        sys.exit("unknown client " + which)
    runners[which](*args)


if __name__ == "__main__":
    main()
