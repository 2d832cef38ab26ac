"""Where S3 is and how to sign for it, read from the AWS SDKs' standard configuration, once for every S3 client.

Every AWS SDK reads the same configuration: an S3-compatible server from ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` (or the profile's ``endpoint_url``), the region from ``AWS_REGION`` (the Java SDK's
variable), ``AWS_DEFAULT_REGION`` or the profile (``AWS_PROFILE``, ``~/.aws/config``), credentials from
their default chain. Not every SDK reads all of it: boto3 ignores ``AWS_REGION``, and Spark's ``s3a``
connector signs for ``us-east-2`` whenever it is given an endpoint and no region, which a server
enforcing its region refuses (``AuthorizationHeaderMalformed``). So the configuration is resolved here,
once, and handed to each client explicitly: boto3 (:func:`s3_client`, for reading traces before Spark
starts) and Spark's ``s3a`` (:func:`pipelines.session.s3a_options`), which then reach the same server,
in the same region, addressing buckets the same way (by path on an S3-compatible server, as such servers
expect).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

__all__ = ["S3Settings", "s3_settings", "s3_client", "ENDPOINT_VARIABLES", "DEFAULT_REGION"]

#: The variables naming an S3-compatible server, the service's own first (the AWS SDKs' order).
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
#: The region when none is configured (a server of one's own accepts any; AWS S3 redirects to the bucket's).
DEFAULT_REGION = "us-east-1"

_CREDENTIAL_VARIABLES = (
    "AWS_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
)
_clients: dict[tuple, object] = {}
_clients_guard = threading.Lock()


@dataclass(frozen=True)
class S3Settings:
    """The S3 a client should reach: ``endpoint`` (None: AWS S3 itself) and the ``region`` it signs for."""

    endpoint: str | None
    region: str

    @property
    def path_style(self) -> bool:
        """Address buckets by path (``http://host:port/bucket/key``): what S3-compatible servers expect."""
        return self.endpoint is not None


def s3_settings() -> S3Settings:
    """The S3 the environment names (see the module docstring).

    A profile named by ``AWS_PROFILE`` that the configuration files lack adds
    nothing here: a client of it fails when it is used, naming the profile (a
    session that never touches S3 must not fail on it).
    """
    import botocore.exceptions
    import botocore.session

    session = botocore.session.Session()  # reads AWS_PROFILE, AWS_CONFIG_FILE, AWS_DEFAULT_REGION
    try:
        profile = session.get_scoped_config()
        profile_region = session.get_config_variable("region")
    except botocore.exceptions.ProfileNotFound:
        profile, profile_region = {}, os.environ.get("AWS_DEFAULT_REGION")
    endpoint = next((os.environ[name] for name in ENDPOINT_VARIABLES if os.environ.get(name)), None)
    region = os.environ.get("AWS_REGION") or profile_region or DEFAULT_REGION
    return S3Settings(endpoint or profile.get("endpoint_url"), region)


def s3_client(settings: S3Settings | None = None):
    """A boto3 S3 client of ``settings`` (default: :func:`s3_settings`), one per configuration (clients are
    thread-safe and slow to build).

    Credentials come from boto3's default chain: ``AWS_ACCESS_KEY_ID`` /
    ``AWS_SECRET_ACCESS_KEY``, the profile, the instance's role.
    """
    import boto3
    from botocore.config import Config

    settings = settings or s3_settings()
    # Every variable of the credential chain: a job that changes them (a rotated key) gets a client of its own.
    key = (settings, *(os.environ.get(name) for name in _CREDENTIAL_VARIABLES))
    with _clients_guard:
        if key not in _clients:
            config = Config(
                connect_timeout=5,
                read_timeout=30,
                retries={"mode": "standard", "max_attempts": 3},
                s3={"addressing_style": "path"} if settings.path_style else {},
            )
            _clients[key] = boto3.session.Session().client(
                "s3", region_name=settings.region, endpoint_url=settings.endpoint, config=config
            )
        return _clients[key]
