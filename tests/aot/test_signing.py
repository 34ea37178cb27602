"""gpt_aot keygen / sign: keys, manifest.sig, and refusal to sign a modified artifact.

The runtime's side (trusted keys, refusals) is tests/runtime/test_signature.cpp.
"""

import json
import stat

import pytest

from gpt_aot.__main__ import main
from gpt_aot.artifact import signing
from gpt_aot.artifact.manifest import file_entries


@pytest.fixture
def artifact(tmp_path):
    d = tmp_path / "art"
    d.mkdir()
    (d / "weights.safetensors").write_bytes(b"w" * 100)
    (d / "prefill.pt2").write_bytes(b"p" * 50)
    (d / "manifest.json").write_text(json.dumps({"format": "gpt-aot", "files": file_entries(d)}, indent=2))
    return d


@pytest.fixture
def keys(tmp_path):
    return signing.generate_keypair(tmp_path / "release")


def test_keygen_writes_a_private_secret_and_never_overwrites(keys, tmp_path):
    secret, public = keys
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert secret.read_text().startswith("ed25519-secret:") and len(secret.read_text().strip()) == 15 + 64
    assert len(signing.read_public_key(public)) == 32
    with pytest.raises(ValueError, match="never overwritten"):
        signing.generate_keypair(tmp_path / "release")


def test_signed_manifest_verifies_with_its_key_only(artifact, keys, tmp_path):
    secret, public = keys
    kid = signing.sign_artifact(artifact, secret)
    sig = json.loads((artifact / "manifest.sig").read_text())
    assert sig["key_id"] == kid == signing.key_id(signing.read_public_key(public))
    assert len(bytes.fromhex(sig["signature"])) == 64
    assert signing.verify_artifact(artifact, public)
    _, other_public = signing.generate_keypair(tmp_path / "other")
    assert not signing.verify_artifact(artifact, other_public)


def test_any_change_to_the_manifest_breaks_the_signature(artifact, keys):
    secret, public = keys
    signing.sign_artifact(artifact, secret)
    text = (artifact / "manifest.json").read_bytes()
    (artifact / "manifest.json").write_bytes(text + b" ")  # even whitespace
    assert not signing.verify_artifact(artifact, public)


def test_signing_refuses_an_artifact_whose_files_do_not_match(artifact, keys):
    secret, _ = keys
    (artifact / "prefill.pt2").write_bytes(b"q" * 50)
    with pytest.raises(ValueError, match="prefill.pt2"):
        signing.sign_artifact(artifact, secret)
    assert not (artifact / "manifest.sig").exists()


def test_signature_file_is_never_listed_in_the_manifest(artifact, keys):
    signing.sign_artifact(artifact, keys[0])
    assert "manifest.sig" not in file_entries(artifact)


def test_cli_keygen_and_sign(tmp_path, artifact, capsys):
    assert main(["keygen", "-o", str(tmp_path / "cli")]) == 0
    assert main(["sign", str(artifact), "--key", str(tmp_path / "cli.key")]) == 0
    assert signing.verify_artifact(artifact, tmp_path / "cli.pub")
    assert main(["sign", str(artifact), "--key", str(tmp_path / "cli.pub")]) == 1  # a public key cannot sign
    assert "not a key file" in capsys.readouterr().err
