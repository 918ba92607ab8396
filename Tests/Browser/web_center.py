#!/usr/bin/env python3
"""The web notification center in a real browser, through the real path: the `tidings`
daemon, an app process (WebCenterTestApp) that uses UserNotifications, and headless
Chromium driven by Playwright (the system's /usr/bin/chromium; never `playwright install`).

    web_center.py --tidings .build/debug/tidings --app .build/debug/WebCenterTestApp \
                  --work /tmp/x [--shots docs] [--bench]

Prints "ok NAME" or "FAIL NAME: why" per check, then "N passed, M failed"; exits 1 on a
failure. With --bench it also measures fire → banner latency and the center with 10,000
notifications (docs/benchmarks.md, "Web notification center").
"""
import argparse
import base64
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import zlib

APP = "com.example.webtest"
QUIET = "com.example.webquiet"
results = []
# How long a step may take on a slow, loaded machine (seconds; Playwright takes ms). Every
# wait is for its specific condition, so a fast machine does not wait this long and a broken
# page still fails, only later.
WAIT = 60
WAIT_MS = WAIT * 1000


def check(name, condition, why=""):
    results.append((name, bool(condition)))
    print(("ok " + name) if condition else ("FAIL " + name + ": " + why), flush=True)
    return condition


def png(width, height, colour):
    """A plain PNG of one colour with a white band, so a thumbnail shows something."""
    raw = b""
    for y in range(height):
        row = bytes(colour) if abs(y - height // 2) > height // 8 else b"\xff\xff\xff"
        raw += b"\x00" + row * width
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def gif(frames, size=8, delay=1000):
    """An animated GIF, one plain colour a frame (each shown `delay` hundredths of a second),
    written by hand: a two-colour table per frame and LZW codes of 3 bits, a clear code
    before every two pixels so the code size never grows."""
    def image_data():
        bits, count, out = 0, 0, bytearray()
        codes = []
        for _ in range(size * size // 2):
            codes += [4, 0, 0]          # clear, then two pixels of colour 0
        codes.append(5)                 # end of information
        for code in codes:
            bits |= code << count
            count += 3
            while count >= 8:
                out.append(bits & 0xFF); bits >>= 8; count -= 8
        if count:
            out.append(bits & 0xFF)
        blocks = b"".join(bytes([len(out[i:i + 255])]) + bytes(out[i:i + 255]) for i in range(0, len(out), 255))
        return b"\x02" + blocks + b"\x00"
    data = b"GIF89a" + struct.pack("<HHBBB", size, size, 0, 0, 0)
    data += b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"      # loop forever
    for colour in frames:
        data += b"\x21\xf9\x04\x00" + struct.pack("<H", delay) + b"\x00\x00"
        # An image descriptor with a local table of two colours (flags 0x80: 2 entries).
        data += b"\x2c" + struct.pack("<HHHHB", 0, 0, size, size, 0x80) + bytes(colour) + b"\x00\x00\x00"
        data += image_data()
    return data + b"\x3b"


def wav():
    rate, samples = 8000, 800
    data = bytes(128 + int(60 * ((i // 8) % 2 * 2 - 1)) for i in range(samples))
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate, 1, 8)
            + b"data" + struct.pack("<I", len(data)) + data)


class Lines:
    """A child's output, collected on a thread; `wait` looks for a line matching a pattern."""
    def __init__(self, process, log):
        self.lines, self.process, self.lock = [], process, threading.Condition()
        self.log = open(log, "w")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log.write(line + "\n"); self.log.flush()
            with self.lock:
                self.lines.append(line)
                self.lock.notify_all()

    def wait(self, pattern, timeout=WAIT, start=0):
        deadline = time.time() + timeout
        regex = re.compile(pattern)
        with self.lock:
            while True:
                for line in self.lines[start:]:
                    match = regex.search(line)
                    if match:
                        return match
                left = deadline - time.time()
                if left <= 0:
                    return None
                self.lock.wait(left)

    def mark(self):
        with self.lock:
            return len(self.lines)


def request(port, method, path, headers=None, body=None, host=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    all_headers = {"Host": host or "127.0.0.1:%d" % port}
    all_headers.update(headers or {})
    connection.request(method, path, body=body, headers=all_headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, dict(response.getheaders()), data


def websocket_status(port, headers):
    """The HTTP status of a WebSocket upgrade request (101 when accepted)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    lines = ["GET /api/events HTTP/1.1", "Host: 127.0.0.1:%d" % port, "Upgrade: websocket", "Connection: Upgrade",
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13"]
    lines += ["%s: %s" % item for item in headers.items()]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    status = s.recv(200).split(b" ")[1]
    s.close()
    return int(status)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tidings", required=True)
    parser.add_argument("--app", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--shots")
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    work = os.path.abspath(args.work)
    data_dir, app_dir = os.path.join(work, "data"), os.path.join(work, "app")
    os.makedirs(os.path.join(app_dir, "Library", "Sounds"), exist_ok=True)
    os.makedirs(os.path.join(work, "files"), exist_ok=True)
    # The misbehaving content extension of ContentExtensionHostTests, for the "fixture" category.
    fixture = os.path.join(os.path.dirname(os.path.abspath(args.app)), "TestContentExtension")
    with open(os.path.join(app_dir, "manifest.json"), "w") as f:
        json.dump({"bundleIdentifier": APP, "displayName": "Web Test", "executable": os.path.abspath(args.app),
                   "extensions": [{"bundleIdentifier": APP + ".content", "point": "content", "executable": fixture,
                                   "attributes": {"UNNotificationExtensionCategory": "fixture",
                                                  "UNNotificationExtensionUserInteractionEnabled": False}},
                                  {"bundleIdentifier": APP + ".touch", "point": "content", "executable": fixture,
                                   "attributes": {"UNNotificationExtensionCategory": "interactive",
                                                  "UNNotificationExtensionUserInteractionEnabled": True}}]}, f)
    with open(os.path.join(app_dir, "icon.png"), "wb") as f:
        f.write(png(32, 32, (255, 149, 0)))
    with open(os.path.join(app_dir, "Library", "Sounds", "ding.wav"), "wb") as f:
        f.write(wav())

    env = dict(os.environ, TIDINGS_DATA_DIR=data_dir)
    daemon = subprocess.Popen([args.tidings, "daemon", "--data-dir", data_dir, "--web-port", "0", "--consent", "web", "--quiet"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    daemon_out = Lines(daemon, os.path.join(work, "daemon.log"))
    app = None
    try:
        match = daemon_out.wait(r"web center (http://\S+)")
        if not check("daemon prints the center's address", match, "no address in the daemon's output"):
            return
        url = match.group(1)
        parsed = urllib.parse.urlparse(url)
        port, key = parsed.port, urllib.parse.parse_qs(parsed.query)["key"][0]
        opened = subprocess.run([args.tidings, "open", "--data-dir", data_dir], capture_output=True, text=True, env=env)
        check("tidings open prints the same address", opened.stdout.strip() == url, opened.stdout + opened.stderr)
        installed = subprocess.run([args.tidings, "apps", "install", os.path.join(app_dir, "manifest.json"), "--data-dir", data_dir],
                                   capture_output=True, text=True, env=env)
        check("the test app installs", installed.returncode == 0, installed.stdout + installed.stderr)
        check("the secret is not in the daemon's log", key not in open(os.path.join(work, "daemon.log")).read().replace(url, ""),
              "the key appears outside the printed address")

        # Refusals, before any browser: no secret, a wrong one, another Host, no CSRF token.
        status, _, _ = request(port, "GET", "/")
        check("no secret: 401", status == 401, str(status))
        status, _, _ = request(port, "GET", "/api/state")
        check("no cookie on the API: 401", status == 401, str(status))
        status, _, _ = request(port, "GET", "/?key=" + "0" * 64)
        check("wrong secret: 403", status == 403, str(status))
        status, headers, _ = request(port, "GET", "/?key=" + key)
        cookie = headers.get("Set-Cookie", "")
        check("the secret sets an HttpOnly SameSite=Strict cookie and leaves the URL",
              status == 303 and "HttpOnly" in cookie and "SameSite=Strict" in cookie and headers.get("Location") == "/", "%s %s" % (status, headers))
        session = cookie.split(";")[0]
        status, _, _ = request(port, "GET", "/api/state", {"Cookie": session}, host="rebind.example:%d" % port)
        check("another Host name (DNS rebinding): 421", status == 421, str(status))
        origin = "http://127.0.0.1:%d" % port
        body = json.dumps({"app": APP, "change": {"sound": 1}})
        status, _, _ = request(port, "POST", "/api/settings", {"Cookie": session, "Origin": origin, "Content-Type": "application/json"}, body)
        check("a change without the CSRF token: 403", status == 403, str(status))
        status, _, _ = request(port, "POST", "/api/settings", {"Cookie": session, "Origin": origin, "X-Tidings-CSRF": "f" * 64}, body)
        check("a change with a wrong CSRF token: 403", status == 403, str(status))
        page = request(port, "GET", "/", {"Cookie": session})[2].decode()
        csrf = re.search(r'name="csrf" content="([0-9a-f]+)"', page).group(1)
        status, _, _ = request(port, "POST", "/api/settings", {"Cookie": session, "Origin": "http://evil.example", "X-Tidings-CSRF": csrf}, body)
        check("a change from another Origin: 403", status == 403, str(status))
        status, _, _ = request(port, "POST", "/api/settings", {"Cookie": session, "Origin": origin, "X-Tidings-CSRF": csrf},
                               json.dumps({"app": APP, "change": {}, "pad": "x" * 70000}))
        check("a request body over the limit: 413", status == 413, str(status))
        # A refused upgrade is answered 400 by the WebSocket upgrader, whatever the reason.
        check("a WebSocket from the page's origin with the cookie upgrades", websocket_status(port, {"Cookie": session, "Origin": origin}) == 101)
        check("a WebSocket without Origin is refused", websocket_status(port, {"Cookie": session}) in (400, 403))
        check("a WebSocket from another Origin is refused", websocket_status(port, {"Cookie": session, "Origin": "http://evil.example"}) in (400, 403))
        check("a WebSocket without the cookie is refused", websocket_status(port, {"Origin": origin}) in (400, 401))
        for path in ["/attachments/%s/..%%2F..%%2Fweb-secret" % APP, "/attachments/..%2F..%2F/web-secret",
                     "/attachments/%s/%%2e%%2e" % APP, "/attachments/%s/web-secret.png" % APP, "/attachments/x/y.png",
                     "/sounds/%s/..%%2Fmanifest.json" % APP, "/assets/..%2F..%2Fweb-secret"]:
            status, _, data = request(port, "GET", path, {"Cookie": session})
            check("no escape from the store: " + path, status == 404 and key.encode() not in data, "%s %r" % (status, data[:80]))

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=[
                "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--autoplay-policy=no-user-gesture-required",
                "--disable-background-networking", "--disable-component-update", "--no-first-run"])
            context = browser.new_context(viewport={"width": 900, "height": 760})
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            page.on("pageerror", lambda error: print("page error: %s" % error, flush=True))
            page.goto(url)
            check("the page drops the key from the address", "key=" not in page.url, page.url)
            page.wait_for_selector("#connection.live", timeout=WAIT_MS)
            cookies = context.cookies()
            check("the cookie is HttpOnly and SameSite=Strict", any(c["httpOnly"] and c["sameSite"] == "Strict" for c in cookies), str(cookies))
            check("the page cannot read the cookie", page.evaluate("document.cookie") == "")

            # Consent in the page.
            app = subprocess.Popen([args.app], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=dict(env, TIDINGS_SOCKET=os.path.join(data_dir, "daemon.sock"), TIDINGS_BUNDLE_ID=APP))
            app_out = Lines(app, os.path.join(work, "app.log"))
            page.wait_for_selector("#consent:not([hidden])", timeout=WAIT_MS)
            title = page.text_content("#consent .alert-title")
            check("the consent prompt names the app", "Web Test" in title, title)
            if args.shots:
                page.screenshot(path=os.path.join(args.shots, "web-center-consent.png"))
            page.click("#consent .allow")
            check("consent granted in the page reaches the app", app_out.wait(r"^authorized true$"), "app: " + "\n".join(app_out.lines[-5:]))
            check("the app is ready", app_out.wait(r"^ready$"))

            def post(item):
                mark = app_out.mark()
                app.stdin.write((json.dumps(item) + "\n").encode()); app.stdin.flush()
                found = app_out.wait(r"^(added %s (\d+)|error .*)$" % re.escape(item.get("id", "")), start=mark)
                return int(found.group(2)) if found and found.group(2) else None

            # A banner with its image and sound.
            image = os.path.join(work, "files", "photo.png")
            with open(image, "wb") as f:
                f.write(png(160, 100, (40, 120, 220)))
            post({"id": "photo", "title": "New photo", "subtitle": "From Ann", "body": "Look at this sunset",
                  "image": image, "sound": "ding.wav", "badge": 3, "thread": "photos", "clip": [0.25, 0.25, 0.5, 0.5]})
            banner = page.wait_for_selector('.banner[data-id="photo"]', timeout=WAIT_MS)
            check("a banner appears with title, subtitle and body",
                  banner.text_content().count("New photo") == 1 and "From Ann" in banner.text_content() and "Look at this sunset" in banner.text_content())
            thumb = page.query_selector('.banner[data-id="photo"] .thumbnail')
            thumb_url = thumb.get_attribute("data-url") if thumb else None
            check("the banner shows the first attachment's thumbnail", thumb_url and thumb_url.startswith("/attachments/%s/" % APP), str(thumb_url))
            if thumb_url:
                status, headers, data = request(port, "GET", thumb_url, {"Cookie": session})
                check("the thumbnail comes from the app's store as a PNG", status == 200 and data.startswith(b"\x89PNG") and headers.get("Content-Type") == "image/png", str(status))
                loaded = page.evaluate("""url => new Promise(r => { const i = new Image(); i.onload = () => r(i.naturalWidth); i.onerror = () => r(0); i.src = url; })""", thumb_url)
                check("the browser loads the image", loaded == 160, str(loaded))
                # The image is blue with a white band over its middle quarter; the clipping
                # rectangle (its middle half) stretches the band over the thumbnail's middle half.
                try:
                    page.wait_for_selector('.banner[data-id="photo"] .thumbnail[data-frame] canvas', timeout=WAIT_MS)
                except Exception:
                    pass
                rgb = shown_pixel(page, '.banner[data-id="photo"] .thumbnail', 0.5, 0.32)
                check("the clipping rectangle zooms the thumbnail", all(c > 200 for c in rgb), str(rgb))
            sounds = page.evaluate("window.tidingsTrace.sounds")
            check("the app's named sound plays", any(s.get("url") == "/sounds/%s/ding.wav" % APP and s["played"] for s in sounds), str(sounds))
            status, _, data = request(port, "GET", "/sounds/%s/ding.wav" % APP, {"Cookie": session})
            check("the sound file is served from the app's Library/Sounds", status == 200 and data.startswith(b"RIFF"), str(status))
            if args.shots:
                page.screenshot(path=os.path.join(args.shots, "web-center-banner.png"), clip={"x": 200, "y": 40, "width": 500, "height": 150})

            # The expanded notification shows the attachment at full size.
            expand(page, "photo")
            page.wait_for_selector("#expanded:not([hidden]) .media img.attachment")
            width = page.evaluate("""() => new Promise(r => { const i = document.querySelector('#expanded .media img.attachment');
                                     i.complete ? r(i.naturalWidth) : (i.onload = () => r(i.naturalWidth)); })""")
            check("the expanded notification shows the image at full size", width == 160, str(width))
            page.click("#expanded .close")
            thumbnail_time(page, post, work)

            # Markup in a title or body is text.
            post({"id": "markup", "title": '<img src=x onerror="window.pwned=1"><b>bold</b>', "body": "<script>window.pwned=2</script>&amp;"})
            page.wait_for_selector('.card[data-id="markup"]', timeout=WAIT_MS)
            title = page.text_content('#groups .card[data-id="markup"] .title')
            check("markup in a title shows as text", title == '<img src=x onerror="window.pwned=1"><b>bold</b>', title)
            body = page.text_content('#groups .card[data-id="markup"] .body')
            check("markup in a body shows as text", body == "<script>window.pwned=2</script>&amp;", body)
            check("no markup from an app ran or was parsed",
                  page.evaluate("window.pwned === undefined && !document.querySelector('#groups b, #groups img:not(.app-icon), #groups script')"))

            # A thread groups: three messages from two people, one featured by relevance.
            for i, (who, relevance) in enumerate([("Ann", 0.2), ("Bob", 0.9), ("Ann", 0.1)]):
                post({"id": "chat-%d" % i, "title": who, "body": "Message %d" % i, "thread": "chat", "category": "message",
                      "summaryArgument": who, "relevance": relevance})
            page.wait_for_function("""() => { const g = document.querySelector('#groups .group[data-thread="chat"]'); return g && g.dataset.count === "3"; }""", timeout=WAIT_MS)
            group = page.query_selector('#groups .group[data-thread="chat"]')
            featured = group.query_selector(".card").get_attribute("data-id")
            check("a thread groups into one stack", group.get_attribute("data-count") == "3" and "stack" in group.get_attribute("class"))
            check("relevanceScore picks the featured notification", featured == "chat-1", featured)
            more = group.query_selector(".more").text_content()
            check("the stack's summary uses categorySummaryFormat and summaryArgument", more == "3 more messages from Ann and Bob", more)
            check("another thread is its own group", page.query_selector('#groups .group[data-thread="photos"]') is not None)
            if args.shots:
                page.evaluate("document.querySelectorAll('.banner').forEach(b => b.remove())")
                page.screenshot(path=os.path.join(args.shots, "web-center.png"))

            # A button and a text reply reach the app's delegate.
            click_until(page, '#groups .group.stack[data-thread="chat"] .card .title',
                        '#groups .group[data-thread="chat"] .card[data-id="chat-0"]')
            expand(page, "chat-0")
            if args.shots:
                page.screenshot(path=os.path.join(args.shots, "web-center-expanded.png"))
            buttons = page.eval_on_selector_all("#expanded .action", "bs => bs.map(b => [b.dataset.action, b.className])")
            check("the category's actions are buttons, the destructive one marked",
                  [b[0] for b in buttons] == ["reply", "like", "archive", "delete"] and "destructive" in dict(buttons)["delete"], str(buttons))
            mark = app_out.mark()
            page.click('#expanded .action[data-action="like"]')
            check("a button reaches the app's delegate", app_out.wait(r"^response chat-0 action=like$", start=mark), "\n".join(app_out.lines[-3:]))
            expand(page, "chat-2")
            page.click('#expanded .action[data-action="reply"]')
            placeholder = page.get_attribute("#expanded .reply-text", "placeholder")
            send = page.text_content("#expanded .reply-send")
            check("the reply field has textInputPlaceholder and textInputButtonTitle", placeholder == "Say something…" and send == "Send", "%s / %s" % (placeholder, send))
            page.fill("#expanded .reply-text", "hello from the page <b>")
            mark = app_out.mark()
            page.click("#expanded .reply-send")
            check("a text reply reaches the app's delegate", app_out.wait(r"^response chat-2 action=reply text=hello from the page <b>$", start=mark), "\n".join(app_out.lines[-3:]))
            expand(page, "chat-1")
            page.click('#expanded .action[data-action="archive"]')
            check("authenticationRequired asks for confirmation", page.is_visible("#confirm"))
            mark = app_out.mark()
            page.click("#confirm .allow")
            check("a confirmed action reaches the app", app_out.wait(r"^response chat-1 action=archive$", start=mark))

            desktop_reply(browser, context, port, key, post, app_out)

            # Clearing a notification of a customDismissAction category tells the app.
            post({"id": "bye", "title": "Dismiss me", "category": "message"})
            page.wait_for_selector('#groups .card[data-id="bye"]')
            mark = app_out.mark()
            page.click('#groups .card[data-id="bye"] .clear')
            check("clearing sends the custom dismiss action", app_out.wait(r"^response bye action=com.apple.UNNotificationDismissActionIdentifier$", start=mark))

            # Settings ▸ Notifications: a change reaches getNotificationSettings; the app's own settings.
            page.click("#tab-settings")
            click_until(page, '.settings-row[data-app="%s"]' % APP, '#settings-app input[name="sounds"]')
            if args.shots:
                page.screenshot(path=os.path.join(args.shots, "web-center-settings.png"))
            with page.expect_response(settings_answer) as answer:
                page.uncheck('#settings-app input[name="sounds"]')
            check("the daemon takes the settings change", answer.value.ok, str(answer.value.status))
            page.wait_for_function("""() => !document.querySelector('#settings-app input[name="sounds"]').checked""")
            mark = app_out.mark()
            app.stdin.write(b'{"settings": true}\n'); app.stdin.flush()
            check("a settings change reaches getNotificationSettings", app_out.wait(r"^settings sound=1 ", start=mark), "\n".join(app_out.lines[-2:]))
            mark = app_out.mark()
            page.click("#settings-app .app-settings")
            check("the app's own settings button calls openSettingsFor", app_out.wait(r"^openSettings$", start=mark))
            with page.expect_response(settings_answer):
                page.select_option('#settings-app select[name="previews"]', "2")
            page.click("#tab-center")
            post({"id": "secret", "title": "Hidden", "body": "the private text", "category": "message", "thread": "private"})
            page.wait_for_selector('#groups .card[data-id="secret"]')
            text = page.text_content('#groups .card[data-id="secret"]')
            check("hidden previews show the category's placeholder, not the body", "1 new messages" in text and "the private text" not in text, text)
            state = request(port, "GET", "/api/state", {"Cookie": session})[2].decode()
            check("a hidden preview's body never reaches the page", "the private text" not in state)
            request(port, "POST", "/api/settings", {"Cookie": session, "Origin": origin, "X-Tidings-CSRF": csrf},
                    json.dumps({"app": APP, "change": {"showPreviews": 0, "sound": 2}}))
            grouping(page, args, env, data_dir, port, session, app, app_out, post)
            state_read_races_events(page, post, port, session)

            # Provisional authorization: no prompt, delivered quietly to the center.
            quiet_dir = os.path.join(work, "quiet")
            os.makedirs(quiet_dir, exist_ok=True)
            with open(os.path.join(quiet_dir, "manifest.json"), "w") as f:
                json.dump({"bundleIdentifier": QUIET, "displayName": "Quiet", "executable": os.path.abspath(args.app)}, f)
            subprocess.run([args.tidings, "apps", "install", os.path.join(quiet_dir, "manifest.json"), "--data-dir", data_dir], capture_output=True, env=env)
            quiet = subprocess.Popen([args.app], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=dict(env, TIDINGS_SOCKET=os.path.join(data_dir, "daemon.sock"), TIDINGS_BUNDLE_ID=QUIET, WEB_TEST_PROVISIONAL="1"))
            try:
                quiet_out = Lines(quiet, os.path.join(work, "quiet.log"))
                check("provisional authorization is granted without a prompt", quiet_out.wait(r"^authorized true$") and page.is_hidden("#consent"))
                quiet_out.wait(r"^ready$")
                quiet.stdin.write(b'{"id": "hush", "title": "Quietly", "body": "no banner"}\n'); quiet.stdin.flush()
                quiet_out.wait(r"^added hush")
                page.wait_for_selector('#groups .card[data-app="%s"][data-id="hush"]' % QUIET, timeout=WAIT_MS)
                time.sleep(0.3)
                banners = page.evaluate("window.tidingsTrace.banners.filter(b => b.id === 'hush').length")
                check("provisional delivers quietly: in the center, no banner", banners == 0, str(banners))
            finally:
                quiet.terminate(); quiet.wait(10)

            fixture_extension(page, post, app_out)
            interactive_extension(page, post, port, session)

            # The seeds' content extension (Examples/ContentExtension, in the sample app's manifest).
            content_extension(page, args, env, data_dir, work)

            if args.bench:
                bench(page, post, app, app_out, daemon, port, session, work)
            browser.close()
    finally:
        for child in (app, daemon):
            if child and child.poll() is None:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    child.kill()
        passed = sum(1 for _, ok in results if ok)
        print("%d passed, %d failed" % (passed, len(results) - passed), flush=True)
    sys.exit(0 if all(ok for _, ok in results) else 1)


def desktop_reply(browser, context, port, key, post, app_out):
    """The desktop's way to a reply field (docs/desktop.md): on a notification server without
    `inline-reply`, the desktop presenter opens `<center>#reply=<app>/<notification>/<action>`
    (each part percent-encoded, no key in it). With the cookie the page expands that
    notification with its reply field focused; the parts are data; without the cookie the
    page says how to get in."""
    base = "http://127.0.0.1:%d/" % port
    quote = lambda part: urllib.parse.quote(part, safe="")
    ident = 'desk/1 "<b>ü'
    post({"id": ident, "title": "From the desktop", "body": "Answer me", "category": "message"})
    page = context.new_page()
    page.goto(base + "#reply=" + "/".join(quote(p) for p in (APP, ident, "reply")))
    try:
        page.wait_for_selector("#expanded:not([hidden]) .reply:not([hidden])", timeout=10000)
    except Exception as error:
        check("#reply= opens that notification's reply field", False, str(error))
        page.close()
        return
    check("#reply= expands that notification", page.get_attribute("#expanded", "data-id") == ident, str(page.get_attribute("#expanded", "data-id")))
    check("#reply= focuses its reply field", page.evaluate("document.activeElement === document.querySelector('#expanded .reply-text')"))
    check("#reply= leaves the address bar", "#" not in page.url, page.url)
    mark = app_out.mark()
    page.keyboard.type("typed after the desktop's click")
    page.keyboard.press("Enter")
    check("the reply typed into the focused field reaches the app's delegate",
          app_out.wait(r"^response %s action=reply text=typed after the desktop's click$" % re.escape(ident), start=mark), "\n".join(app_out.lines[-3:]))
    page.close()

    # Hostile hashes: markup, `..`, bad percent-encoding, extra parts, an action that is no reply field.
    post({"id": "desk-2", "title": "Still here", "category": "message"})
    hostile = [("markup", quote('"><img src=x onerror="window.pwned=3">') + "/desk-2/reply"),
               ("markup in the action", quote(APP) + "/desk-2/" + quote("<img src=x onerror=window.pwned=4>")),
               ("dot-dot", "..%2F..%2Fapi%2Fstate/../reply"),
               ("dot-dot parts", quote(APP) + "/../reply"),
               ("bad percent-encoding", quote(APP) + "/desk-2/%E0%A4%A"),
               ("four parts", quote(APP) + "/desk-2/reply/x"),
               ("not a text-input action", quote(APP) + "/desk-2/like"),
               ("no such notification", quote(APP) + "/nothing/reply")]
    for name, fragment in hostile:
        bad = context.new_page()
        bad.goto(base + "#reply=" + fragment)
        try:
            bad.wait_for_selector("#banners .banner.error", timeout=10000)
            text = bad.text_content("#banners .banner.error")
        except Exception as error:
            text = "no message: %s" % error
        check("a hostile #reply= (%s) only says not found" % name,
              text.startswith("Not found") and bad.is_hidden("#expanded")
              and bad.evaluate("window.pwned === undefined && !document.querySelector('img[src=x], .banner.error *, #expanded .media *')"), text)
        bad.close()

    # Without the cookie: how to get in, and no key anywhere.
    fresh = browser.new_context()
    anonymous = fresh.new_page()
    anonymous.goto(base + "#reply=" + "/".join(quote(p) for p in (APP, "desk-2", "reply")))
    text = anonymous.text_content("body") or ""
    check("#reply= without the cookie says how to get in (tidings open)", "tidings open" in text and key not in anonymous.content(), text)
    fresh.close()


def state_read_races_events(page, post, port, session):
    """The page reads the state over HTTP and gets its changes over the WebSocket, two
    connections: a state read from before an event that arrives after the event must not
    undo it. The read is held (Playwright's route) until the event has been applied."""
    origin = "http://127.0.0.1:%d" % port
    csrf = re.search(r'name="csrf" content="([0-9a-f]+)"', request(port, "GET", "/", {"Cookie": session})[2].decode()).group(1)
    headers = {"Cookie": session, "Origin": origin, "X-Tidings-CSRF": csrf, "Content-Type": "application/json"}
    held = []
    listed = "k => state.notifications.has(k)"
    raced = APP + "\nraced"

    def read_held_state():
        """Starts a state read and answers it with the state of that moment, held until release()."""
        before = page.evaluate("() => document.body.dataset.loaded")
        page.evaluate("() => { load(); }")
        deadline = time.time() + WAIT
        while not held and time.time() < deadline:
            page.wait_for_timeout(20)

        def release():
            route, response = held.pop()
            route.fulfill(response=response)
            page.wait_for_function("b => document.body.dataset.loaded !== b", arg=before, timeout=WAIT_MS)
        return bool(held), release

    page.route("**/api/state", lambda route: held.append((route, route.fetch())))
    try:
        started, release = read_held_state()
        if not check("the page reads its state (held)", started):
            return
        post({"id": "raced", "title": "Raced", "body": "arrives while an older state is read"})
        page.wait_for_function(listed, arg=raced, timeout=WAIT_MS)
        release()
        check("a notification whose event arrives during an older state read stays in the center", page.evaluate(listed, raced))
        started, release = read_held_state()
        if not check("the page reads its state again (held)", started):
            return
        request(port, "POST", "/api/dismiss", headers, json.dumps({"app": APP, "identifiers": ["raced"]}))
        page.wait_for_function("k => !state.notifications.has(k)", arg=raced, timeout=WAIT_MS)
        release()
        check("a notification removed during an older state read that lists it stays removed", not page.evaluate(listed, raced))
    finally:
        page.unroute("**/api/state")


def grouping(page, args, env, data_dir, port, session, app, app_out, post):
    """Settings ▸ Notifications ▸ Notification Grouping: kept by the daemon with the app's
    settings (not in the browser), and honoured by the center."""
    origin = "http://127.0.0.1:%d" % port
    csrf = re.search(r'name="csrf" content="([0-9a-f]+)"', request(port, "GET", "/", {"Cookie": session})[2].decode()).group(1)
    headers = {"Cookie": session, "Origin": origin, "X-Tidings-CSRF": csrf}
    stacks = """() => [...document.querySelectorAll('#groups .group[data-app="%s"]')]
                  .filter(g => g.querySelector('.card[data-id^="g-"]')).map(g => g.dataset.count).sort().join()""" % APP

    def open_settings():
        page.click("#tab-settings")
        if not page.is_visible('#settings-app select[name="grouping"]'):
            click_until(page, '.settings-row[data-app="%s"]' % APP, '#settings-app select[name="grouping"]')
        page.wait_for_selector('#settings-app select[name="grouping"]')

    def choose(value):
        open_settings()
        with page.expect_response(settings_answer):
            page.select_option('#settings-app select[name="grouping"]', value)
        page.click("#tab-center")

    def wait_stacks(expected):
        try:
            page.wait_for_function("() => (%s)() === %s" % (stacks, json.dumps(expected)), timeout=WAIT_MS)
        except Exception:
            pass
        return page.evaluate(stacks)

    for identifier, thread in (("g-1", "g-a"), ("g-2", "g-a"), ("g-3", "g-b")):
        post({"id": identifier, "title": "Grouped " + identifier, "thread": thread})
    got = wait_stacks("1,2")
    check("automatic grouping stacks by thread", got == "1,2", got)
    choose("off")
    got = wait_stacks("1,1,1")
    check("grouping off: every notification on its own", got == "1,1,1", got)
    status, _, data = request(port, "GET", "/api/state", {"Cookie": session})
    stored = [a["settings"].get("grouping") for a in json.loads(data)["apps"] if a.get("app") == APP and a.get("settings")]
    check("the grouping is stored in the daemon with the app's settings", stored == ["off"], "%s %s" % (status, stored))
    check("the grouping is not kept in the browser", page.evaluate("Object.keys(localStorage).filter(k => k.includes('grouping')).length") == 0)
    page.reload()
    page.wait_for_selector("#connection.live", timeout=WAIT_MS)
    got = wait_stacks("1,1,1")
    check("after a reload the center still honours the stored grouping", got == "1,1,1", got)
    open_settings()
    value = page.eval_on_selector('#settings-app select[name="grouping"]', "s => s.value")
    check("the settings page shows the stored grouping", value == "off", value)
    page.click("#tab-center")
    choose("byApp")
    page.wait_for_function("() => document.querySelectorAll('#groups .group[data-app=\"%s\"]').length === 1" % APP, timeout=WAIT_MS)
    check("grouping by app: one stack for the app", len(page.query_selector_all('#groups .group[data-app="%s"]' % APP)) == 1)
    status, _, _ = request(port, "POST", "/api/settings", headers, json.dumps({"app": APP, "change": {"grouping": "sideways"}}))
    check("an unknown grouping is refused", status == 400, str(status))
    choose("automatic")
    got = wait_stacks("1,2")
    check("back to automatic: stacks by thread again", got == "1,2", got)
    # `tidings settings --grouping` reaches the open page at once (no reload).
    changed = subprocess.run([args.tidings, "settings", APP, "--grouping", "off", "--data-dir", data_dir], capture_output=True, text=True, env=env)
    got = wait_stacks("1,1,1")
    check("tidings settings --grouping off reaches the open page", changed.returncode == 0 and got == "1,1,1", "%s %s" % (changed.stdout + changed.stderr, got))
    open_settings()
    value = page.eval_on_selector('#settings-app select[name="grouping"]', "s => s.value")
    check("the page's settings show the grouping set by the CLI", value == "off", value)
    page.click("#tab-center")
    refused = subprocess.run([args.tidings, "settings", APP, "--grouping", "sideways", "--data-dir", data_dir], capture_output=True, text=True, env=env)
    check("a bad --grouping is refused and changes nothing", refused.returncode != 0 and page.evaluate(stacks) == "1,1,1", refused.stderr)
    subprocess.run([args.tidings, "settings", APP, "--grouping", "automatic", "--data-dir", data_dir], capture_output=True, env=env)
    wait_stacks("1,2")
    request(port, "POST", "/api/dismiss", headers, json.dumps({"app": APP, "identifiers": ["g-1", "g-2", "g-3"]}))


def shown_pixel(page, selector, fx=0.5, fy=0.5):
    """The colour the person sees at (fx, fy) of an element: from a screenshot of it."""
    shot = base64.b64encode(page.query_selector(selector).screenshot(animations="disabled")).decode()
    return page.evaluate("""async ([b64, fx, fy]) => {
        const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        const bitmap = await createImageBitmap(new Blob([bytes], { type: "image/png" }));
        const context = new OffscreenCanvas(bitmap.width, bitmap.height).getContext("2d");
        context.drawImage(bitmap, 0, 0);
        return [...context.getImageData(Math.floor(bitmap.width * fx), Math.floor(bitmap.height * fy), 1, 1).data.slice(0, 3)]; }""", [shot, fx, fy])


def thumbnail_time(page, post, work):
    """UNNotificationAttachmentOptionsThumbnailTimeKey on an animated GIF (frame 0 red for
    10 s, frame 1 blue): the banner's and the card's thumbnail is the still of that frame
    (frame 0 without the option; past the last frame, the last), as the person sees it (the
    centre pixel of a screenshot); the expanded view shows the whole animated GIF."""
    def pixel(selector):
        return shown_pixel(page, selector)

    def colour(rgb):
        r, g, b = rgb
        return "red" if r > 180 and g < 80 and b < 80 else "blue" if b > 180 and r < 80 and g < 80 else str(rgb)

    cases = [("gif-none", None, "red", "0"), ("gif-one", 1, "blue", "1"), ("gif-cmtime", {"value": 3, "timescale": 3}, "blue", "1"),
             ("gif-fraction", 0.9, "red", "0"), ("gif-past-end", 1e9, "blue", "1")]
    for identifier, frame, expected, index in cases:
        path = os.path.join(work, "files", identifier + ".gif")
        with open(path, "wb") as f:
            f.write(gif([(255, 0, 0), (0, 0, 255)]))
        item = {"id": identifier, "title": "GIF " + identifier, "image": path, "thread": identifier}
        if frame is not None:
            item["time"] = frame
        page.evaluate("document.querySelectorAll('.banner').forEach(b => b.remove())")
        post(item)
        thumb = '.banner[data-id="%s"] .thumbnail' % identifier
        try:
            page.wait_for_selector(thumb + "[data-frame] canvas", timeout=WAIT_MS)
        except Exception:
            pass
        shown = page.get_attribute(thumb, "data-frame") if page.query_selector(thumb) else "no banner"
        got = colour(pixel(thumb)) if page.query_selector(thumb) else "no banner"
        check("ThumbnailTime %s: the banner's GIF thumbnail is frame %s (%s)" % (json.dumps(frame), index, expected),
              got == expected and shown == index, "%s, frame %s" % (got, shown))
    # No movie fixture (nothing here encodes one cheaply): the page's seek target for a
    # movie's ThumbnailTime, against durations.
    got = page.evaluate("[thumbnailSeconds(1.5, 10), thumbnailSeconds(1e9, 2), thumbnailSeconds(0, 2), thumbnailSeconds(3, NaN), thumbnailSeconds(-1, 2)]")
    check("a movie thumbnail seeks to ThumbnailTime, clamped to the duration", got == [1.5, 1.999, 0, 3, 0], str(got))
    card = '#groups .card[data-id="gif-one"] .thumbnail'
    page.evaluate("document.querySelectorAll('.banner').forEach(b => b.remove())")
    page.wait_for_selector(card + "[data-frame] canvas", timeout=WAIT_MS)
    got = colour(pixel(card))
    check("ThumbnailTime 1: the center's card shows frame 1 too", got == "blue", got)
    expand(page, "gif-one")
    full = page.wait_for_selector("#expanded:not([hidden]) .media img.attachment", timeout=WAIT_MS)
    check("the expanded view shows the whole animated GIF", full.get_attribute("src").endswith(".gif")
          and page.query_selector("#expanded .media canvas") is None, full.get_attribute("src"))
    page.click("#expanded .close")
    page.evaluate("ids => dismiss(%s, ids)" % json.dumps(APP), [c[0] for c in cases])


def settings_answer(response):
    """The daemon's answer to a settings change the page made."""
    return response.url.endswith("/api/settings") and response.request.method == "POST"


def click_until(page, selector, done):
    """Clicks `selector` until `done` is on the page. The center redraws as events arrive
    (a card is replaced, moves up as one above it goes): a click that lands while its
    element is replaced is lost, so click again, for up to WAIT seconds. A page that never
    shows `done` fails at the caller's next step; what stopped the last click is printed.
    Banners (which arrive late on a loaded machine and sit over the page) are taken away
    first, as `expand` does."""
    deadline = time.time() + WAIT
    last = None
    while True:
        page.evaluate("document.querySelectorAll('.banner').forEach(b => b.remove())")
        try:
            page.click(selector, timeout=5000)
        except Exception as error:
            last = error
        try:
            page.wait_for_selector(done, timeout=5000)
            return True
        except Exception:
            if time.time() > deadline:
                overlays = page.evaluate("""() => [...document.querySelectorAll('body > *')]
                    .filter(e => !e.hidden && getComputedStyle(e).display !== 'none')
                    .map(e => e.tagName + '#' + e.id + '.' + e.className).join(' ')""")
                print("click_until %s: %s never came; last click: %s; shown: %s"
                      % (selector, done, str(last).splitlines()[0] if last else "landed", overlays))
                return False


def expand(page, identifier):
    """Opens notification `identifier` of the center in the expanded view: another one that
    a moving card put there is closed, and the click repeated."""
    page.evaluate("document.querySelectorAll('.banner').forEach(b => b.remove())")
    wanted = '#expanded:not([hidden])[data-id="%s"]' % identifier
    deadline = time.time() + WAIT
    while time.time() < deadline and not page.query_selector(wanted):
        if not page.is_hidden("#expanded"):
            # The view may close by itself between the check and the click (its notification
            # went away: an answered one the app removed) — then there is nothing to close,
            # and a click would wait the whole timeout for a button that is not coming back.
            try:
                page.click("#expanded .close", timeout=2000)
            except Exception:
                pass
        if click_until(page, '#groups .card[data-id="%s"] .title' % identifier, "#expanded:not([hidden])"):
            page.wait_for_selector("#expanded:not([hidden])")
    return page.query_selector(wanted) is not None


def fixture_extension(page, post, app_out):
    """Tests/Fixtures/TestContentExtension for the test app's "fixture" category: a crash on
    open shows the default content; the media play/pause button reaches the extension."""
    # A crash on open: the default content, no frame, and the page still works.
    post({"id": "crashy", "title": "Crashing view", "body": "the default content", "category": "fixture",
          "thread": "fixture-crash", "userInfo": {"fixture": "crash"}})
    page.wait_for_selector('#groups .card[data-id="crashy"]', timeout=WAIT_MS)
    expand(page, "crashy")
    try:
        page.wait_for_selector('#expanded[data-extension="failed"]', timeout=WAIT_MS)
    except Exception:
        pass
    state = page.evaluate("""() => { const o = document.querySelector('#expanded');
        return [o.dataset.extension, !o.querySelector('.default-content').hidden, o.querySelector('.default-content .body').textContent,
                o.querySelectorAll('.extension-slot iframe').length]; }""")
    check("an extension that crashes shows the default content and no frame",
          state == ["failed", True, "the default content", 0], str(state))
    mark = app_out.mark()
    page.click('#expanded .action[data-action="play-self"]')
    check("after the crash the page still works: the category's button reaches the app",
          app_out.wait(r"^response crashy action=play-self$", start=mark), "\n".join(app_out.lines[-3:]))
    page.wait_for_selector("#expanded", state="hidden", timeout=WAIT_MS)

    # The media play/pause button: drawn over the frame, a press reaches the extension
    # (mediaPlay/mediaPause re-render its view), its state follows mediaPlayingStarted.
    post({"id": "media", "title": "Song", "body": "a song", "category": "fixture", "thread": "fixture-media",
          "userInfo": {"fixture": "media", "tint": "#ff0000"}})
    page.wait_for_selector('#groups .card[data-id="media"]', timeout=WAIT_MS)
    expand(page, "media")
    try:
        page.wait_for_selector('#expanded[data-extension="open"] .extension-slot .media-button', timeout=WAIT_MS)
    except Exception:
        check("the extension's media button is drawn over its frame", False, str(page.evaluate("document.querySelector('#expanded').dataset.extension")))
        return
    button = page.evaluate("""() => { const b = document.querySelector('#expanded .media-button'), s = getComputedStyle(b);
        return [b.dataset.playing, s.position, s.left, s.top, s.width, s.color, b.parentElement.querySelector('iframe') !== null]; }""")
    check("the extension's media button is drawn over its frame at its frame and tint",
          button == ["false", "absolute", "10px", "20px", "44px", "rgb(255, 0, 0)", True], str(button))

    def frame_text():
        frame = page.wait_for_selector("#expanded .extension-slot iframe").content_frame()
        try:
            return frame.evaluate("document.body ? document.body.innerText : ''")
        except Exception:
            return ""

    def wait_frame(word):
        deadline = time.time() + WAIT
        while time.time() < deadline:
            if word in frame_text():
                return True
            time.sleep(0.1)
        return False

    page.click("#expanded .media-button")
    page.wait_for_selector('#expanded .media-button[data-playing="true"]', timeout=WAIT_MS)
    check("pressing play calls the extension's mediaPlay and shows pause", wait_frame("playing"), frame_text())
    page.click("#expanded .media-button")
    page.wait_for_selector('#expanded .media-button[data-playing="false"]', timeout=WAIT_MS)
    check("pressing pause calls the extension's mediaPause and shows play", wait_frame("paused"), frame_text())
    page.click('#expanded .action[data-action="play-self"]')
    try:
        page.wait_for_selector('#expanded .media-button[data-playing="true"]', timeout=WAIT_MS)
        started = True
    except Exception:
        started = False
    check("mediaPlayingStarted from the extension context turns the button to pause", started,
          str(page.evaluate("document.querySelector('#expanded .media-button')?.dataset.playing")))
    page.click("#expanded .close")
    page.wait_for_selector("#expanded", state="hidden", timeout=WAIT_MS)


def interactive_extension(page, post, port, session):
    """UNNotificationExtensionUserInteractionEnabled: a click on a button in the frame runs
    the extension's Swift code (view.eventHandler) and the view re-renders with what it did;
    the page relays only its open frame's events, the center only with that frame's token."""
    post({"id": "touch", "title": "Touch me", "body": "an interactive view", "category": "interactive", "thread": "touch",
          "userInfo": {"fixture": "interactive"}})
    page.wait_for_selector('#groups .card[data-id="touch"]', timeout=WAIT_MS)
    expand(page, "touch")
    try:
        page.wait_for_selector('#expanded[data-extension="open"] .extension-slot iframe', timeout=WAIT_MS)
    except Exception:
        check("the interactive extension's view opens", False, str(page.evaluate("document.querySelector('#expanded').dataset.extension")))
        return
    frame_element = page.query_selector("#expanded .extension-slot iframe")
    check("an interactive view's frame may run scripts, still without allow-same-origin",
          frame_element.get_attribute("sandbox") == "allow-scripts", str(frame_element.get_attribute("sandbox")))

    def frame_text():
        try:
            return page.query_selector("#expanded .extension-slot iframe").content_frame().evaluate("document.body ? document.body.innerText : ''")
        except Exception:
            return ""

    def wait_text(words):
        deadline = time.time() + WAIT
        while time.time() < deadline:
            if all(w in frame_text() for w in words):
                return True
            time.sleep(0.1)
        return False

    page.wait_for_selector("#expanded .extension-slot iframe").content_frame().wait_for_selector("#add", timeout=WAIT_MS)
    page.wait_for_selector("#expanded .extension-slot iframe").content_frame().click("#add")
    check("a click in the frame reaches the extension's eventHandler and the view re-renders",
          wait_text(["count=5", "event=add:5"]), frame_text())
    page.wait_for_selector("#expanded .extension-slot iframe").content_frame().wait_for_selector("#add", timeout=WAIT_MS)
    page.wait_for_selector("#expanded .extension-slot iframe").content_frame().evaluate("tidings.send('add', '2')")
    check("the view's own script sends an event with tidings.send", wait_text(["count=7", "event=add:2"]), frame_text())

    # Not from the frame: the page ignores it; not with the frame's token: the center refuses.
    src = page.get_attribute("#expanded .extension-slot iframe", "src")
    token = src.split("/")[2]
    page.evaluate("t => window.postMessage({ tidings: 'event', token: t, element: 'add', value: '100' }, '*')", token)
    time.sleep(0.3)
    check("a message that is not from the open frame is not relayed", "count=7" in frame_text() and "count=107" not in frame_text(), frame_text())
    view = int(page.evaluate("extensionSession"))
    origin = "http://127.0.0.1:%d" % port
    csrf = re.search(r'name="csrf" content="([0-9a-f]+)"', request(port, "GET", "/", {"Cookie": session})[2].decode()).group(1)
    headers = {"Cookie": session, "Origin": origin, "X-Tidings-CSRF": csrf, "Content-Type": "application/json"}
    for name, body in [("another token", {"session": view, "token": "0" * 64, "element": "add", "value": "1"}),
                       ("another view's session", {"session": view + 1000, "token": token, "element": "add", "value": "1"})]:
        status, _, _ = request(port, "POST", "/api/extension/event", headers, json.dumps(body))
        check("an event with %s is refused" % name, status == 403, str(status))
    status, _, _ = request(port, "POST", "/api/extension/event", headers, json.dumps({"session": view, "token": token, "element": "x" * 257, "value": ""}))
    check("an event over the element id limit is refused", status == 413, str(status))
    # The page hides the view at once and tells the center without waiting (its close is a
    # request of its own): once that request is answered, the token names nothing.
    with page.expect_response(lambda r: r.url.endswith("/api/extension/close"), timeout=WAIT_MS) as closed:
        page.click("#expanded .close")
    check("closing the view tells the center", closed.value.status == 200, str(closed.value.status))
    page.wait_for_selector("#expanded", state="hidden", timeout=WAIT_MS)
    status, _, _ = request(port, "POST", "/api/extension/event", headers, json.dumps({"session": view, "token": token, "element": "add", "value": "1"}))
    check("after the view closes its token names nothing", status == 403, str(status))


def content_extension(page, args, env, data_dir, work):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    manifest = os.path.join(root, "Examples", "SampleApp", "manifest.json")
    sample_app = os.path.join(os.path.dirname(os.path.abspath(args.app)), "SampleApp")
    installed = subprocess.run([args.tidings, "apps", "install", manifest, "--data-dir", data_dir], capture_output=True, text=True, env=env)
    if not check("the sample app with its content extension installs", installed.returncode == 0, installed.stdout + installed.stderr):
        return
    sample = subprocess.Popen([sample_app], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env=dict(env, TIDINGS_SOCKET=os.path.join(data_dir, "daemon.sock"), TIDINGS_BUNDLE_ID="com.example.tidings.sample"))
    try:
        out = Lines(sample, os.path.join(work, "sample.log"))
        page.wait_for_selector("#consent:not([hidden])", timeout=WAIT_MS)
        page.click("#consent .allow")
        check("the sample app schedules its items", out.wait(r"scheduled items now"), "\n".join(out.lines[-5:]))
        page.evaluate("document.querySelectorAll('.banner').forEach(b => b.remove())")
        page.wait_for_function("""() => [...document.querySelectorAll('#groups .group[data-app="com.example.tidings.sample"]')]
                                      .some(g => g.dataset.count !== undefined)""", timeout=WAIT_MS)
        # The sample app's notifications share no thread: one stack; open it, then the items.
        # (The center redraws as notifications arrive: look again each time.)
        deadline = time.time() + WAIT
        clicks = []
        while time.time() < deadline:
            if page.is_hidden("#expanded") is False:
                break
            try:
                if page.query_selector('#groups .card[data-id="items"]'):
                    clicks.append("items")
                    page.click('#groups .card[data-id="items"] .title', timeout=5000)
                elif page.query_selector('#groups .group.stack[data-app="com.example.tidings.sample"]'):
                    clicks.append("stack")
                    page.click('#groups .group.stack[data-app="com.example.tidings.sample"] .card .title', timeout=5000)
                else:
                    clicks.append("none")
            except Exception as error:
                clicks.append(str(error).splitlines()[0:12])
            time.sleep(0.2)
        try:
            page.wait_for_selector('#expanded[data-extension="open"] .extension-slot iframe', timeout=WAIT_MS)
        except Exception:
            state = page.evaluate("""() => {
                const overlay = document.querySelector('#expanded'), slot = overlay.querySelector('.extension-slot');
                const frame = slot.querySelector('iframe'), box = frame && frame.getBoundingClientRect();
                return {extension: overlay.dataset.extension, overlayHidden: overlay.hidden, slotHidden: slot.hidden,
                        title: overlay.querySelector('.title') && overlay.querySelector('.title').textContent,
                        frame: frame && {src: frame.getAttribute('src'), box: [box.width, box.height]},
                        errors: [...document.querySelectorAll('.banner.error')].map(b => b.textContent),
                        consentHidden: document.querySelector('#consent').hidden,
                        banners: [...document.querySelectorAll('.banner')].map(b => b.dataset.id),
                        groups: [...document.querySelectorAll('#groups .group')].map(g =>
                            [g.dataset.app, g.className, [...g.querySelectorAll('.card')].map(c => c.dataset.id)])};
            }""")
            check("the content extension's view opens", False, "%s\nclicks: %s\nsample app: %s" % (state, clicks[-6:], "\n".join(out.lines[-8:])))
            return
        frame_element = page.query_selector("#expanded .extension-slot iframe")
        sandbox = frame_element.get_attribute("sandbox")
        check("the extension's view is in a sandboxed frame without allow-same-origin", sandbox is not None and "allow-same-origin" not in sandbox, str(sandbox))
        frame = frame_element.content_frame()
        frame.wait_for_selector("h2", timeout=WAIT_MS)
        first = frame.text_content("h2")
        check("the content extension renders its first item", first == "Blue", str(first))
        check("the frame cannot reach the center's page or cookie",
              frame.evaluate("() => { try { return parent.document.cookie === undefined ? 'no' : 'yes'; } catch (e) { return 'blocked'; } }") == "blocked")
        images = frame.evaluate("() => [...document.images].map(i => i.naturalWidth)")
        check("the item's attachment image loads in the frame", images and images[0] > 0, str(images))
        if args.shots:
            page.screenshot(path=os.path.join(args.shots, "web-center-content-extension.png"))
        page.click('#expanded .action[data-action="switch"]')
        page.wait_for_function("() => { const f = document.querySelector('#expanded .extension-slot iframe'); return f && f.contentDocument === null; }")
        frame = page.wait_for_selector("#expanded .extension-slot iframe").content_frame()
        frame.wait_for_function("() => document.querySelector('h2') && document.querySelector('h2').textContent === 'Orange'", timeout=WAIT_MS)
        check("switch re-renders with the other item and keeps the view", page.is_visible("#expanded") and frame.text_content("h2") == "Orange")
        mark = out.mark()
        page.click('#expanded .action[data-action="open"]')
        check("open forwards the action to the app", out.wait(r"response items action=open", start=mark), "\n".join(out.lines[-3:]))
        try:
            page.wait_for_selector("#expanded", state="hidden", timeout=WAIT_MS)
        except Exception:
            pass
        check("open closes the view", page.is_hidden("#expanded"))
    finally:
        sample.terminate(); sample.wait(10)


def bench(page, post, app, app_out, daemon, port, session, work):
    """Fire → banner visible, and the center with 10,000 delivered notifications."""
    page.reload(); page.wait_for_selector("#connection.live")
    page.evaluate("window.tidingsTrace.banners.length = 0")
    latencies = []
    for i in range(100):
        before = post({"id": "bench-%d" % i, "title": "Bench %d" % i, "body": "fire to banner"})
        page.wait_for_function("id => window.tidingsTrace.banners.some(b => b.id === id)", arg="bench-%d" % i)
        shown = page.evaluate("id => window.tidingsTrace.banners.find(b => b.id === id).shown", "bench-%d" % i)
        latencies.append(shown - before)
    latencies.sort()
    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99) - 1]
    print("bench fire-to-banner ms: p50 %.1f p99 %.1f max %.1f (n=%d)" % (p50, p99, latencies[-1], len(latencies)), flush=True)
    mark = app_out.mark()
    app.stdin.write(b'{"bulk": 10000, "threads": 100}\n'); app.stdin.flush()
    app_out.wait(r"^bulk done", timeout=600, start=mark)
    # `add` returns when the request is durable; wait until all 10,000 are delivered.
    deadline = time.time() + 300
    while time.time() < deadline:
        started = time.time()
        state = json.loads(request(port, "GET", "/api/state", {"Cookie": session})[2])
        state_ms = (time.time() - started) * 1000
        if sum(1 for n in state["notifications"] if n["identifier"].startswith("bulk-")) >= 10000:
            break
        time.sleep(1)
    print("bench 10k /api/state: %.0f ms, %.1f MB of JSON" % (state_ms, len(json.dumps(state)) / 1e6), flush=True)
    page.close()
    page = page.context.new_page()
    client = page.context.new_cdp_session(page)
    client.send("Performance.enable")
    start = time.time()
    page.goto("http://127.0.0.1:%d/" % port)
    page.wait_for_function("() => document.body.dataset.loaded", timeout=60000)
    first = page.evaluate("() => Number(document.body.dataset.loaded) - performance.timeOrigin")
    metrics = {m["name"]: m["value"] for m in client.send("Performance.getMetrics")["metrics"]}
    count = page.evaluate("() => [...document.querySelectorAll('#groups .group')].reduce((n, g) => n + Number(g.dataset.count), 0)")
    rss = [l for l in open("/proc/%d/status" % daemon.pid) if l.startswith("VmRSS")][0].split()[1]
    print("bench 10k first render ms: %.0f (wall %.0f); notifications shown %d; JS heap used %.1f MB; DOM nodes %d; daemon RSS %.1f MB"
          % (first, (time.time() - start) * 1000, count, metrics.get("JSHeapUsedSize", 0) / 1e6, metrics.get("Nodes", 0), int(rss) / 1024), flush=True)
    check("bench: the center shows 10,000 notifications", count >= 10000, str(count))


if __name__ == "__main__":
    main()
