"""Ed25519 keys and manifest signatures (libsodium through ctypes).

An artifact is signed by a detached manifest.sig beside manifest.json: an
Ed25519 signature over the manifest's exact bytes. The manifest holds the
sha256 and size of every other file, so the signature vouches for all of them.
The runtime checks it before parsing anything (runtime/formats/signature.cpp) when
trusted public keys are configured. Formats and key handling: docs/SECURITY.md.
"""

import ctypes
import ctypes.util
import hashlib
import json
import os
from pathlib import Path

from gpt_aot.artifact.manifest import MANIFEST, SIGNATURE, sha256_file
from gpt_aot.base.files import replaced_atomically

SIGNATURE_FORMAT = "gpt-aot-signature"
PUBLIC_PREFIX = "ed25519-public:"
SECRET_PREFIX = "ed25519-secret:"

_SEED_BYTES = 32
_PUBLIC_BYTES = 32
_SECRET_BYTES = 64
_SIGNATURE_BYTES = 64


def _sodium():
    name = ctypes.util.find_library("sodium")
    if name is None:
        raise RuntimeError("libsodium not found: install libsodium23 (scripts/setup.sh installs libsodium-dev)")
    lib = ctypes.CDLL(name)
    if lib.sodium_init() < 0:
        raise RuntimeError("libsodium failed to initialise")
    return lib


def key_id(public_key: bytes) -> str:
    """First 16 hex digits of the sha256 of the 32 public-key bytes (as the runtime computes it)."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def _keypair(seed: bytes) -> tuple[bytes, bytes]:
    lib = _sodium()
    public = ctypes.create_string_buffer(_PUBLIC_BYTES)
    secret = ctypes.create_string_buffer(_SECRET_BYTES)
    if lib.crypto_sign_ed25519_seed_keypair(public, secret, seed) != 0:
        raise RuntimeError("crypto_sign_ed25519_seed_keypair failed")
    return public.raw, secret.raw


def _read_hex_line(path: Path, prefix: str, size: int) -> bytes:
    text = Path(path).read_text().strip()
    if not text.startswith(prefix):
        raise ValueError(f"{path}: not a key file (expected one line '{prefix}<hex>')")
    try:
        raw = bytes.fromhex(text[len(prefix) :])
    except ValueError:
        raw = b""
    if len(raw) != size:
        raise ValueError(f"{path}: expected {2 * size} hex digits after '{prefix}'")
    return raw


def read_public_key(path: Path) -> bytes:
    return _read_hex_line(path, PUBLIC_PREFIX, _PUBLIC_BYTES)


def generate_keypair(prefix: Path) -> tuple[Path, Path]:
    """Writes PREFIX.key (the secret seed, mode 0600) and PREFIX.pub; refuses to overwrite either."""
    prefix = Path(prefix)
    secret_path, public_path = Path(f"{prefix}.key"), Path(f"{prefix}.pub")
    for p in (secret_path, public_path):
        if p.exists():
            raise ValueError(f"{p} exists: keys are never overwritten")
    seed = os.urandom(_SEED_BYTES)
    public, _ = _keypair(seed)
    fd = os.open(secret_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(SECRET_PREFIX + seed.hex() + "\n")
    public_path.write_text(PUBLIC_PREFIX + public.hex() + "\n")
    return secret_path, public_path


def check_hashes(directory: Path, manifest: dict) -> None:
    """Raises ValueError unless every file the manifest lists has its recorded size and sha256."""
    for name, entry in manifest["files"].items():
        path = directory / name
        if not path.is_file() or path.stat().st_size != entry["size"] or sha256_file(path) != entry["sha256"]:
            raise ValueError(f"{path} does not match the manifest: refusing to sign a modified artifact")


def sign_artifact(directory: Path, secret_key: Path) -> str:
    """Checks the artifact's hashes, then writes manifest.sig over manifest.json's bytes. Returns the key id."""
    directory = Path(directory)
    seed = _read_hex_line(secret_key, SECRET_PREFIX, _SEED_BYTES)
    manifest_bytes = (directory / MANIFEST).read_bytes()
    check_hashes(directory, json.loads(manifest_bytes))
    public, secret = _keypair(seed)
    lib = _sodium()
    signature = ctypes.create_string_buffer(_SIGNATURE_BYTES)
    n = ctypes.c_ulonglong(len(manifest_bytes))
    if lib.crypto_sign_ed25519_detached(signature, None, manifest_bytes, n, secret):
        raise RuntimeError("crypto_sign_ed25519_detached failed")
    body = {
        "format": SIGNATURE_FORMAT,
        "format_version": 1,
        "algorithm": "ed25519",
        "key_id": key_id(public),
        "signature": signature.raw.hex(),
    }
    with replaced_atomically(directory / SIGNATURE) as tmp:
        tmp.write_text(json.dumps(body, indent=2) + "\n")
    return body["key_id"]


def verify_artifact(directory: Path, public_key: Path) -> bool:
    """True when manifest.sig is a valid signature by `public_key` over manifest.json (hashes not re-checked)."""
    directory = Path(directory)
    public = read_public_key(public_key)
    body = json.loads((directory / SIGNATURE).read_text())
    if body.get("key_id") != key_id(public):
        return False
    signature = bytes.fromhex(body["signature"])
    manifest_bytes = (directory / MANIFEST).read_bytes()
    lib = _sodium()
    n = ctypes.c_ulonglong(len(manifest_bytes))
    return lib.crypto_sign_ed25519_verify_detached(signature, manifest_bytes, n, public) == 0
