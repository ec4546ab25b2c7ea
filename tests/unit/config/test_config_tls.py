"""`source.tls` and its files: validated when the config is read, and mapped onto each driver's
options by one function (`binlake.mysql.tls.tls_options`)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from integration.tls_certs import TlsFiles, make_tls_files

from binlake.config.settings import SourceConfig, parse_config
from binlake.errors import ConfigError
from binlake.mysql.tls import tls_options


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def source(**keys: Any) -> SourceConfig:
    return parse_config({"source": {"database": "shop", **keys}}).source


def error(**keys: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        source(**keys)
    return str(caught.value)


def test_tls_defaults_to_preferred_without_files() -> None:
    config = source()
    assert (config.tls, config.tls_ca, config.tls_cert, config.tls_key) == (
        "preferred", None, None, None,
    )  # fmt: skip


@pytest.mark.parametrize("mode", ["disabled", "preferred", "required", "verify_ca"])
def test_every_mode_is_accepted(mode: str) -> None:
    assert source(tls=mode).tls == mode


def test_unknown_mode_is_rejected_naming_the_key_and_the_modes() -> None:
    message = error(tls="on")
    assert "source.tls" in message and "verify_identity" in message, message


def test_a_ca_file_that_does_not_exist_is_rejected_naming_the_key(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    message = error(tls="verify_ca", tls_ca=str(missing))
    assert "source.tls_ca" in message and str(missing) in message, message


@pytest.mark.parametrize("mode", ["disabled", "preferred", "required"])
def test_a_ca_with_a_mode_that_checks_no_certificate_is_rejected(
    mode: str, files: TlsFiles
) -> None:
    message = error(tls=mode, tls_ca=str(files.ca))
    assert f"source.tls is {mode}" in message and "verify_ca" in message, message


@pytest.mark.parametrize("mode", ["verify_ca", "verify_identity"])
def test_a_ca_with_a_verify_mode_is_accepted(mode: str, files: TlsFiles) -> None:
    assert source(tls=mode, tls_ca=str(files.ca)).tls_ca == str(files.ca)


def test_a_client_certificate_needs_its_key(files: TlsFiles) -> None:
    message = error(tls="required", tls_cert=str(files.cert))
    assert "source.tls_cert and source.tls_key" in message, message


@pytest.mark.parametrize("mode", ["disabled", "preferred"])
def test_a_client_certificate_needs_a_mode_that_uses_tls(mode: str, files: TlsFiles) -> None:
    message = error(tls=mode, tls_cert=str(files.cert), tls_key=str(files.key))
    assert "source.tls_cert" in message and "required" in message, message


# ---------------------------------------------------------------------------------------------
# The drivers' options


def test_disabled_and_preferred_options() -> None:
    assert tls_options(source(tls="disabled"), "pymysql") == {
        "ssl_disabled": True, "tls_mode": "disabled",
    }  # fmt: skip
    assert tls_options(source(tls="disabled"), "mysqldb") == {"ssl_mode": "DISABLED"}
    # PyMySQL's own PREFERRED (its shared context); libmariadb starts TLS only when asked.
    assert tls_options(source(), "pymysql") == {"tls_mode": "preferred"}
    assert "ssl" in tls_options(source(), "mysqldb")


def test_pymysql_contexts_check_what_the_mode_asks(files: TlsFiles) -> None:
    required = tls_options(source(tls="required"), "pymysql")["ssl"]
    verify_ca = tls_options(source(tls="verify_ca", tls_ca=str(files.ca)), "pymysql")["ssl"]
    identity = tls_options(source(tls="verify_identity", tls_ca=str(files.ca)), "pymysql")["ssl"]
    assert (required.verify_mode, required.check_hostname) == (ssl.CERT_NONE, False)
    assert (verify_ca.verify_mode, verify_ca.check_hostname) == (ssl.CERT_REQUIRED, False)
    assert (identity.verify_mode, identity.check_hostname) == (ssl.CERT_REQUIRED, True)
    again = tls_options(source(tls="verify_identity", tls_ca=str(files.ca)), "pymysql")["ssl"]
    assert again is identity, "one context per setting, shared by every connection"


def test_mysqldb_verify_ca_checks_the_chain_and_verify_identity_the_name(
    files: TlsFiles,
) -> None:
    verify_ca = tls_options(source(tls="verify_ca", tls_ca=str(files.ca)), "mysqldb")
    assert verify_ca == {"ssl_mode": "REQUIRED", "ssl": {"ca": str(files.ca)}}
    identity = tls_options(
        source(tls="verify_identity", tls_ca=str(files.ca), tls_cert=str(files.cert),
               tls_key=str(files.key)),
        "mysqldb",
    )  # fmt: skip
    assert identity == {
        "ssl_mode": "VERIFY_IDENTITY",
        "ssl": {"ca": str(files.ca), "cert": str(files.cert), "key": str(files.key)},
    }


def test_verify_modes_without_a_ca_use_the_systems() -> None:
    options = tls_options(source(tls="verify_ca"), "mysqldb")["ssl"]
    paths = ssl.get_default_verify_paths()
    assert options in ({"ca": paths.cafile}, {"capath": paths.capath})


def test_a_file_that_is_not_pem_is_a_config_error(tmp_path: Path) -> None:
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a certificate")
    with pytest.raises(ConfigError) as caught:
        tls_options(source(tls="verify_ca", tls_ca=str(bogus)), "pymysql")
    assert "source.tls_ca" in str(caught.value)
