"""An S3 stand-in whose signature check is the AWS SDK's own signer (botocore's S3SigV4Auth,
from moto's virtual environment), for what moto cannot check: moto 5.2.1 refuses keys that need
percent-encoding (a space aside), boto3's requests included, and ignores the request's time. Each request is signed again by botocore from what arrived (its method, its path as
sent, the headers it names as signed, its body and its x-amz-date) and must carry the same
signature; its path must be in the one encoding S3 signs (as S3 decodes and encodes it again);
its payload hash must be the body's, and its time within 15 minutes of this clock,
as S3 requires (--clock-offset sets this server's clock ahead, or behind, of the machine's: a
client whose clock is that far off). Path-style buckets, objects in memory: PUT, GET (Range,
If-None-Match), HEAD, DELETE, with S3's error bodies. Listens on 127.0.0.1 only.

    python reference_s3.py PORT ACCESS_KEY_ID SECRET_ACCESS_KEY [--session-token T] [--clock-offset SECONDS]

Prints "ready" once it listens. Every refused request is logged to stderr with botocore's
canonical request, to show where a client differs.
"""
import argparse
import datetime
import hashlib
import http.server
import re
import sys
import threading
import time
import urllib.parse

import botocore.auth
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

arguments = argparse.ArgumentParser()
arguments.add_argument("port", type=int)
arguments.add_argument("key_id")
arguments.add_argument("secret")
arguments.add_argument("--session-token")
arguments.add_argument("--clock-offset", type=float, default=0)
options = arguments.parse_args()
KEY_ID, SECRET, TOKEN = options.key_id, options.secret, options.session_token
EMPTY = hashlib.sha256(b"").hexdigest()
AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$")
objects = {}
lock = threading.Lock()
# botocore takes the signing time from this function; one request is signed at a time.
signing = threading.Lock()


def botocore_signature(method, host, path, headers, body, amz_date, region, token):
    """The signature botocore gives this request, and its canonical request."""
    moment = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
    request = AWSRequest(method=method, url="http://" + host + path, headers=headers, data=body)
    auth = S3SigV4Auth(Credentials(KEY_ID, SECRET, token), "s3", region)
    with signing:
        now = botocore.auth.get_current_datetime
        botocore.auth.get_current_datetime = lambda: moment
        try:
            auth.add_auth(request)
        finally:
            botocore.auth.get_current_datetime = now
    signature = request.headers["Authorization"].split("Signature=")[1]
    del request.headers["Authorization"]
    return signature, auth.canonical_request(request)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def date_time_string(self, timestamp=None):
        # The Date header by this server's clock, as S3's tells a client how far off it is.
        return super().date_time_string(time.time() + options.clock_offset)

    def answer(self, status, body=b"", headers=(), send_body=True):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if status not in (204, 304):  # neither has a body, nor a length (RFC 9110)
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body and self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code, message):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code><Message>%s</Message></Error>"
                % (code, message)).encode()
        self.answer(status, body, [("Content-Type", "application/xml")])

    def refused(self):
        """The request's refusal, or None when botocore signs it the same."""
        match = AUTHORIZATION.match(self.headers.get("Authorization", ""))
        if not match:
            return 403, "AccessDenied", "no AWS4-HMAC-SHA256 Authorization header"
        key_id, day, region, signed_names, signature = match.groups()
        if key_id != KEY_ID:
            return 403, "InvalidAccessKeyId", "unknown access key id"
        amz_date = self.headers.get("x-amz-date", "")
        try:
            moment = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
        except ValueError:
            return 403, "AccessDenied", "no valid x-amz-date"
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        if abs((now - moment).total_seconds() + options.clock_offset) > 15 * 60:
            return 403, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large."
        if not amz_date.startswith(day):
            return 403, "SignatureDoesNotMatch", "the credential scope's date is not the request's"
        if (self.headers.get("x-amz-security-token") or None) != TOKEN:
            return 403, "InvalidToken", "the session token is not this server's"
        payload = self.headers.get("x-amz-content-sha256", "")
        if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(self.body).hexdigest():
            return 400, "XAmzContentSHA256Mismatch", "the payload hash is not the body's"
        # S3 signs the path in one canonical form (each byte outside A-Z a-z 0-9 - . _ ~ and `/`
        # as %XX, upper case): a path sent in another is refused however it was signed.
        path = urllib.parse.urlsplit(self.path).path
        if urllib.parse.quote(urllib.parse.unquote(path), safe="/~") != path:
            sys.stderr.write("refused %s %s: the path is not in S3's canonical encoding\n" % (self.command, self.path))
            return 403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided."
        names = signed_names.split(";")
        if "host" not in names or "x-amz-date" not in names:
            return 403, "AccessDenied", "host and x-amz-date must be signed"
        headers = {name: self.headers.get(name, "") for name in names if name != "host"}
        theirs, canonical = botocore_signature(self.command, self.headers.get("Host", ""), self.path, headers,
                                               self.body, amz_date, region, TOKEN)
        if theirs != signature:
            sys.stderr.write("refused %s %s; botocore's canonical request:\n%s\n" % (self.command, self.path, canonical))
            return 403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided."
        return None

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        refusal = self.refused()
        if refusal:
            return self.error(*refusal)
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if self.command == "PUT":
            with lock:
                objects[path] = self.body
            return self.answer(200, headers=[("ETag", '"%s"' % hashlib.md5(self.body).hexdigest())])
        if self.command == "DELETE":
            with lock:
                objects.pop(path, None)
            return self.answer(204)
        with lock:
            data = objects.get(path)
        if data is None:
            return self.error(404, "NoSuchKey", "The specified key does not exist.")
        etag = '"%s"' % hashlib.md5(data).hexdigest()
        if self.headers.get("If-None-Match") == etag:
            return self.answer(304, headers=[("ETag", etag)])
        ranged = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        if ranged and int(ranged.group(1)) < len(data):
            first = int(ranged.group(1))
            last = min(int(ranged.group(2) or len(data) - 1), len(data) - 1)
            return self.answer(206, data[first:last + 1],
                               [("ETag", etag), ("Content-Range", "bytes %d-%d/%d" % (first, last, len(data)))])
        self.answer(200, data, [("ETag", etag), ("Content-Type", "application/octet-stream")])

    do_GET = do_HEAD = do_PUT = do_DELETE = handle_any


server = http.server.ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
print("ready", flush=True)
server.serve_forever()
