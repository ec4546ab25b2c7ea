"""`source.tls` in each driver's terms, and TLS failures as advice.

The metadata connections and the binlog reader connect through PyMySQL, the chunk SELECTs
through PyMySQL or MySQLdb (`connection.bulk_driver`); each driver spells the same TLS mode
differently, and each reports a TLS failure its own way.
"""

from __future__ import annotations

import re
import ssl
from functools import lru_cache
from typing import Any, Literal

from binlake.config.settings import SourceConfig, TlsMode
from binlake.errors import ConfigError, SourceError

#: Either driver's error for a TLS setup that failed (no TLS offered, or a failed handshake).
CR_SSL_CONNECTION_ERROR = 2026
#: The handshake's capability flag by which the server offers TLS.
CLIENT_SSL = 2048


def tls_options(source: SourceConfig, driver: Literal["pymysql", "mysqldb"]) -> dict[str, Any]:
    """The connection options that apply `source.tls` in one driver's terms (the binlog reader
    connects through PyMySQL's, with `Connection`).

    PyMySQL: `preferred` passes nothing (PyMySQL's own PREFERRED, whose context `Connection`
    shares); stronger modes pass one shared `SSLContext`, which makes PyMySQL refuse a server
    without TLS, and the mode, for `Connection`'s messages.

    MySQLdb is built on libmariadb, whose `ssl_mode`s are not MySQL's: PREFERRED never starts
    TLS, REQUIRED falls back to plaintext when the server has no TLS, and VERIFY_CA also checks
    the host name; what it does check is a CA given on its own (the chain, not the name). So
    `preferred` sets a cipher list (any TLS option makes it negotiate TLS when offered,
    unverified), `verify_ca` is REQUIRED with the CA, and `bulk_connect` refuses a plaintext
    session itself.
    """
    mode = source.tls
    if driver == "pymysql":
        if mode == "disabled":
            return {"ssl_disabled": True, "tls_mode": mode}
        if mode == "preferred":
            return {"tls_mode": mode}
        return {"ssl": _tls_context(source), "tls_mode": mode}
    if mode == "disabled":
        return {"ssl_mode": "DISABLED"}
    if mode == "preferred":
        return {"ssl": {"cipher": "DEFAULT"}}
    files = {"cert": source.tls_cert, "key": source.tls_key}
    if mode != "required":
        files.update({"ca": source.tls_ca} if source.tls_ca else _system_cas())
    ssl_mode = "VERIFY_IDENTITY" if mode == "verify_identity" else "REQUIRED"
    return {"ssl_mode": ssl_mode, "ssl": {k: v for k, v in files.items() if v}}


def _system_cas() -> dict[str, str | None]:
    paths = ssl.get_default_verify_paths()
    return {"ca": paths.cafile} if paths.cafile else {"capath": paths.capath}


def _tls_context(source: SourceConfig) -> ssl.SSLContext:
    try:
        return _shared_context(source.tls, source.tls_ca, source.tls_cert, source.tls_key)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"the TLS files in source.tls_ca, source.tls_cert and source.tls_key cannot be used "
            f"({exc.strerror or exc}): each must be PEM, the key the certificate's and unencrypted"
        ) from None


@lru_cache(maxsize=16)
def _shared_context(
    mode: TlsMode, ca: str | None, cert: str | None, key: str | None
) -> ssl.SSLContext:
    """One context per TLS setting for all PyMySQL connections: building one loads the CAs,
    which costs more than a short read's whole connection, and a context holds no
    per-connection state."""
    context = ssl.create_default_context(cafile=ca)  # without a CA file: the system's CAs
    # Python 3.13 turns on strict X.509 checks, which the certificates MySQL generates for
    # itself fail (PyMySQL drops them too).
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    context.check_hostname = mode == "verify_identity"
    if mode == "required":
        context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context


def tls_error(where: str, mode: TlsMode, detail: str, offered: bool) -> SourceError:
    """A TLS failure as advice: the server offers no TLS at all, or its certificate fails the
    check the mode asks for."""
    if not offered:
        return SourceError(
            f"the source at {where} does not offer TLS but source.tls is {mode}, which never "
            "falls back to plaintext: enable TLS on the server (ssl_cert and ssl_key), or set "
            "source.tls to preferred to accept an unencrypted connection"
        )
    advice = "set source.tls_ca to the PEM file of the CA that signed the server's certificate"
    if mode == "verify_identity":
        advice += (
            ", and source.host to a name or IP address the certificate lists (verify_ca checks "
            "the chain but not the name)"
        )
    return SourceError(
        f"the TLS connection to the source at {where} failed the check source.tls: {mode} asks "
        f"for ({detail}): {advice}"
    )


def tls_failure(where: str, mode: TlsMode, exc: Exception) -> SourceError | None:
    """The TLS problem behind a driver's connect error, if that is what it is: error 2026 from
    either driver (its text tells a server without TLS from a failed handshake), or PyMySQL's
    2003 raised from an `ssl.SSLError` (a rejected certificate)."""
    cause = getattr(exc, "original_exception", None)
    if isinstance(cause, ssl.SSLError):
        detail = getattr(cause, "verify_message", None) or cause.reason or str(cause)
        return tls_error(where, mode, str(detail), offered=True)
    if exc.args and exc.args[0] == CR_SSL_CONNECTION_ERROR:
        detail = str(exc.args[-1])
        return tls_error(where, mode, detail, offered=not _NO_TLS.search(detail))
    return None


#: PyMySQL's and libmariadb's words for "the server offers no TLS" (both error 2026).
_NO_TLS = re.compile(r"does(?:n't| not) support", re.IGNORECASE)
