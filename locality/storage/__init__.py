"""Where a store lives: a local directory or an S3 bucket, behind one interface (:class:`Objects`).

:func:`open_objects` turns what the user wrote after ``--store`` into the backend that serves it:

- a path (``/data/store``, ``store``) or a ``file://`` URI: :class:`~locality.storage.local.DirectoryObjects`;
- ``s3://bucket/prefix`` (or ``s3a://``, as Hadoop users write it): :class:`~locality.storage.s3.S3Objects`.

Any other scheme is refused naming the ones served: a URI is never read as a relative path (pathlib
would turn ``s3a://bucket/x`` into the local directory ``s3a:/bucket/x``).
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlparse

from locality.errors import InvalidParameterError
from locality.storage.base import Blob, ConditionFailed, NotAnObject, ObjectInfo, Objects

__all__ = ["open_objects", "is_remote", "SCHEMES", "Objects", "Blob", "ObjectInfo", "ConditionFailed", "NotAnObject"]

#: The URI schemes a store may have (a plain path is a local directory).
SCHEMES = ("file", "s3", "s3a")
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def scheme_of(location: str | os.PathLike) -> str | None:
    """The URI scheme of ``location`` in lower case; None for a plain path."""
    match = _URI.match(os.fspath(location)) if isinstance(location, str) else None
    return match.group(1).lower() if match else None


def is_remote(location: str | os.PathLike) -> bool:
    """Whether ``location`` names a store in an object store (not a local directory)."""
    return scheme_of(location) in ("s3", "s3a")


def open_objects(location: str | os.PathLike, *, owner: str = "ConfigStore", parameter: str = "location") -> Objects:
    """The backend that serves ``location``.

    Raises
    ------
    InvalidParameterError
        An empty location, or a URI of a scheme not served (the message names those served).
    """
    if not isinstance(location, (str, os.PathLike)) or not str(os.fspath(location)).strip():
        # Path("") is the working directory: an empty --store (an unset variable) must not write there
        raise InvalidParameterError(
            f"the {parameter!r} parameter of {owner} must name a directory or an s3:// URI; got {location!r}",
            parameter=parameter,
        )
    scheme = scheme_of(location)
    if scheme is None:
        from locality.storage.local import DirectoryObjects

        return DirectoryObjects(location)
    if scheme == "file":
        from locality.storage.local import DirectoryObjects

        parsed = urlparse(os.fspath(location))
        if parsed.netloc not in ("", "localhost"):
            raise InvalidParameterError(
                f"the {parameter!r} parameter of {owner} must be a local directory; {location!r} names one on "
                f"another host",
                parameter=parameter,
            )
        return DirectoryObjects(unquote(parsed.path))
    if scheme in ("s3", "s3a"):
        from locality.storage.s3 import S3Objects

        return S3Objects(os.fspath(location))
    raise InvalidParameterError(
        f"the {parameter!r} parameter of {owner} must be a local directory (a path or file://) or an S3 bucket "
        f"(s3://BUCKET/PREFIX, or s3a://); the scheme {scheme}:// of {location!r} is not served",
        parameter=parameter,
    )
