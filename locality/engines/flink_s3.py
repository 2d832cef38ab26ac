"""Flink's own S3 file system pointed at the store's S3: the ``s3.*`` keys of a Flink configuration.

A switch that stops a job with a savepoint in ``s3://bucket/savepoints`` has Flink write it, through
Flink's S3 file system plugin (``flink-s3-fs-hadoop``, in the distribution's ``plugins/``), and the store is
read by locality's own S3 clients (boto3, the Java reader's AWS SDK v2). Both must reach the same server the
same way, or the rewrite reads a savepoint from one S3 and the store from another. The store's clients read
the AWS SDKs' standard configuration (:mod:`locality._aws`); Flink's plugin reads only its configuration's
``s3.*`` keys, which it passes to Hadoop's ``s3a`` as ``fs.s3a.*``. :func:`flink_s3_configuration` writes those
keys from the same settings:

- ``s3.endpoint`` and ``s3.path.style.access: true`` from ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``
  (an S3-compatible server, its buckets addressed by path, as the store addresses them);
- ``s3.endpoint.region``, the region the requests are signed for (``AWS_REGION``, else the profile's, else
  ``us-east-1``, as the store resolves it);
- ``s3.aws.credentials.provider``: the AWS SDK's own default chain (the variables ``AWS_ACCESS_KEY_ID`` /
  ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and ``~/.aws``, web identity, the
  instance's role), so that no key is copied into a configuration file. ``s3a``'s own default list has no
  profiles and no web identity; a Flink process's credentials are then the ones its environment gives it,
  as for the store;
- ``s3.directory.marker.retention: keep``: after each file it writes, Hadoop 3.3's ``s3a`` deletes the
  empty "directory" objects of its parent folders by default, with retries. A server that keeps folders
  as real directories (the Versity gateway's POSIX backend, the tests' server) refuses to delete a
  folder that is not empty, and the retries' backoff made writing a few small files take minutes
  there; with ``keep`` (Hadoop 3.4's default) it is as fast as with ``flink-s3-fs-presto``
  (``docs/engines/flink.md``). Nothing of the store or the savepoints depends on those markers.

A cluster takes them in its ``config.yaml``; a tool run from ``java`` (``RewriteSavepoint``,
``ReadRealKeyState``) reads them from ``FLINK_CONF_DIR`` (:func:`write_flink_conf`) and the plugin from
``FLINK_PLUGINS_DIR`` (:func:`s3_plugins` finds it in a distribution).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from locality._aws import S3Settings, s3_settings
from locality.errors import InvalidParameterError

__all__ = ["CREDENTIALS_PROVIDER", "S3_PLUGINS", "flink_s3_configuration", "s3_plugins", "write_flink_conf"]

#: The AWS SDK for Java v1's default credential chain, which the plugin's ``s3a`` (Hadoop 3.3, SDK v1) loads.
CREDENTIALS_PROVIDER = "com.amazonaws.auth.DefaultAWSCredentialsProviderChain"
#: The folders of Flink's S3 file system plugins in a distribution's ``plugins/`` (Flink's documented names).
S3_PLUGINS = ("s3-fs-hadoop", "s3-fs-presto")


def flink_s3_configuration(settings: S3Settings | None = None) -> dict[str, str]:
    """The ``s3.*`` keys that point Flink's S3 plugin at ``settings`` (default: the S3 the AWS configuration names).

    See the module's docstring.
    """
    settings = settings or s3_settings()
    keys = {
        "s3.endpoint.region": settings.region,
        "s3.aws.credentials.provider": CREDENTIALS_PROVIDER,
        "s3.directory.marker.retention": "keep",
    }
    if settings.endpoint is not None:
        keys |= {"s3.endpoint": settings.endpoint, "s3.path.style.access": "true"}
    return keys


def write_flink_conf(directory: str | os.PathLike, settings: dict[str, object]) -> Path:
    """A ``config.yaml`` with ``settings`` in ``directory`` (made): a ``FLINK_CONF_DIR``. Returns the directory.

    Written as JSON, which YAML reads: every value keeps its type and no key needs quoting.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(json.dumps(settings, indent=1) + "\n")
    return folder


def s3_plugins(flink_home: str | os.PathLike) -> list[Path]:
    """The S3 file system plugin jars installed in the Flink distribution ``flink_home`` (``plugins/s3-fs-*/``).

    Raises
    ------
    InvalidParameterError
        ``flink_home`` is not a Flink distribution (no ``lib/flink-dist-*.jar``), or has no S3 plugin: the
        message says where Flink's documentation puts it.
    """
    home = Path(flink_home)
    if not list(home.glob("lib/flink-dist-*.jar")):
        raise InvalidParameterError(
            f"the Flink home {home} is not a Flink distribution: it has no lib/flink-dist-*.jar", parameter="flink_home"
        )
    jars = [jar for name in S3_PLUGINS for jar in sorted((home / "plugins" / name).glob("*.jar"))]
    if not jars:
        raise InvalidParameterError(
            f"the Flink distribution {home} has no S3 file system plugin: copy flink-s3-fs-hadoop-*.jar into "
            f"{home / 'plugins' / S3_PLUGINS[0]}/ (Flink's documentation, 'Amazon S3')",
            parameter="flink_home",
        )
    return jars
