"""The store's objects in an S3 bucket (AWS S3 or a server that speaks its API), through boto3.

boto3 is the SDK AWS maintains for Python; its client is configured as every AWS SDK is, the Java one
the engines use included (:mod:`locality._aws`): credentials from ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, a profile (``AWS_PROFILE``, ``~/.aws/config``) or the instance's role; the
region from ``AWS_REGION`` or the profile; an S3-compatible server from ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL``. With such an endpoint, buckets are addressed by path
(``http://host:port/bucket/key``), as S3-compatible servers expect. Conditional writes are S3's own
(``IfNoneMatch="*"``, ``IfMatch=etag``): the server refuses the loser with HTTP 412 [1]_.

Errors: a server that does not answer (refused connection, timeout, 5xx) is
:class:`~locality.errors.StoreUnavailableError` (retry later); a bucket that does not exist, denied
access or missing credentials are :class:`~locality.errors.StoreError` naming the store.

References
----------
.. [1] Amazon S3 User Guide, "Add preconditions to S3 operations with conditional requests":
   https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-requests.html
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

from locality._aws import s3_client, s3_settings
from locality.errors import StoreError, StoreUnavailableError
from locality.storage.base import Blob, ConditionFailed, NotAnObject, ObjectInfo, Objects

__all__ = ["S3Objects"]

_CONDITION_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}
_ABSENT_CODES = {"NoSuchKey", "404", "NotFound"}
#: Reads of one object whose bytes did not match its checksum before the store counts as unavailable.
_READ_ATTEMPTS = 5


class S3Objects(Objects):
    """Objects under ``prefix/`` in ``bucket``; ``location`` is the URI the user gave."""

    def __init__(self, location: str) -> None:
        parsed = urlparse(location)
        self.location = location.rstrip("/")
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        if not self.bucket:
            raise StoreError(f"the store {location!r} names no bucket: write s3://BUCKET/PREFIX")
        # Which server, resolved once: the store's identity and its client name the same one.
        self.settings = s3_settings()
        self._s3 = None

    @property
    def s3(self):
        if self._s3 is None:
            self._s3 = s3_client(self.settings)
        return self._s3

    @property
    def identity(self) -> str:
        # One bucket name on two servers is two stores: the server the environment names is part of it.
        return f"{self.settings.endpoint or 'aws'} s3://{self.bucket}/{self.prefix}"

    def where(self, name: str) -> str:
        return f"{self.location}/{name}" if name else self.location

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _call(self, what: str, name: str, call, **kwargs):
        """``call(Bucket=..., **kwargs)``, its failures turned into the store's errors."""
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

        try:
            return call(Bucket=self.bucket, **kwargs)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code in _CONDITION_CODES or status in (409, 412):
                raise ConditionFailed(self.where(name)) from None
            if code in _ABSENT_CODES or (status == 404 and code != "NoSuchBucket"):
                return None
            if status >= 500 or code in {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout"}:
                raise StoreUnavailableError(
                    f"the store {self.location} is unavailable: {what} {self.where(name)} failed ({code} {status})"
                ) from None
            raise StoreError(
                f"the store {self.location} refused to {what} {self.where(name)}: {code or status} "
                f"{error.get('Message', '')}".rstrip()
            ) from None
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise StoreError(
                f"no credentials for the store {self.location}: {exc} (set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)"
            ) from None
        except BotoCoreError as exc:  # connection refused or reset, timeouts, DNS
            raise StoreUnavailableError(f"the store {self.location} cannot be reached: {exc}") from None

    # ------------------------------------------------------------------ reading
    def get(self, name: str, *, limit: int | None = None) -> Blob | None:
        from botocore.exceptions import FlexibleChecksumError

        for attempt in range(_READ_ATTEMPTS):
            response = self._call("read", name, self.s3.get_object, Key=self._key(name), ChecksumMode="ENABLED")
            if response is None:
                return None
            size = response["ContentLength"]
            if limit is not None and size > limit:
                response["Body"].close()  # the body is never read
                raise NotAnObject(self.where(name), f"it holds {size:,} bytes; it should hold at most {limit:,}")
            try:
                return Blob(response["Body"].read(), response["ETag"])
            except FlexibleChecksumError:
                # The bytes are not the ones the object's checksum (and ETag) describe: read while being replaced,
                # on a server that does not replace data and metadata as one. Read again.
                if attempt + 1 == _READ_ATTEMPTS:
                    raise StoreUnavailableError(
                        f"the store {self.location}: {self.where(name)} kept changing while it was read"
                    ) from None
            except Exception as exc:  # the connection broke mid-body
                raise StoreUnavailableError(
                    f"the store {self.location}: reading {self.where(name)} failed: {exc}"
                ) from None
        raise AssertionError("unreachable")

    def head(self, name: str) -> ObjectInfo | None:
        response = self._call("read", name, self.s3.head_object, Key=self._key(name))
        if response is None:
            return None
        return ObjectInfo(name, response["ContentLength"], response["ETag"], response["LastModified"].timestamp())

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        root = self._key("")
        for page in self._pages(prefix):
            for item in page.get("Contents", []):
                yield ObjectInfo(
                    item["Key"][len(root) :], item["Size"], item.get("ETag"), item["LastModified"].timestamp()
                )

    def children(self, prefix: str = "") -> dict[str, bool]:
        out: dict[str, bool] = {}
        start = len(self._key(prefix))
        for page in self._pages(prefix, delimiter="/"):
            out.update({p["Prefix"][start:].rstrip("/"): True for p in page.get("CommonPrefixes", [])})
            out.update({item["Key"][start:]: False for item in page.get("Contents", [])})
        return out

    def _pages(self, prefix: str, delimiter: str | None = None) -> Iterator[dict]:
        kwargs = {"Prefix": self._key(prefix)} | ({"Delimiter": delimiter} if delimiter else {})
        token = None
        while True:
            page = self._call(
                "list", prefix, self.s3.list_objects_v2, **kwargs, **({"ContinuationToken": token} if token else {})
            )
            if page is None:
                raise StoreError(f"the store {self.location} cannot be listed: its bucket does not answer")
            yield page
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    # ------------------------------------------------------------------ writing
    def put(self, name: str, data: bytes) -> str:
        return self._call("write", name, self.s3.put_object, Key=self._key(name), Body=data)["ETag"]

    def create(self, name: str, data: bytes) -> str:
        return self._call("write", name, self.s3.put_object, Key=self._key(name), Body=data, IfNoneMatch="*")["ETag"]

    def replace(self, name: str, data: bytes, etag: str) -> str:
        response = self._call("write", name, self.s3.put_object, Key=self._key(name), Body=data, IfMatch=etag)
        if response is None:  # gone since it was read
            raise ConditionFailed(self.where(name))
        return response["ETag"]

    def delete(self, name: str) -> None:
        self._call("remove", name, self.s3.delete_object, Key=self._key(name))

    def set_aside(self, name: str, new_name: str) -> None:
        blob = self.get(name)
        if blob is not None:
            self.put(new_name, blob.data)
            self.delete(name)

    def check_writable(self) -> None:
        response = self._call("reach", "", self.s3.head_bucket)
        if response is None:
            raise StoreError(f"the store {self.location} names a bucket that does not exist: {self.bucket}")

    def exists(self) -> bool:
        return bool(self.children(""))
