"""std::filesystem for torch's own calls (aoti_load_package) comes from libstdc++, not from the
static copy libtorch exports (pytorch#133437; gpt_aot/__init__.py): checked through the dynamic
linker's global lookup, as torch's libraries see it, in a fresh interpreter."""

import subprocess
import sys

# Which library the process-wide lookup of std::filesystem::remove_all(const path&) lands in.
WHO_DEFINES = """
import ctypes
{imports}
class Info(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]
libc = ctypes.CDLL(None)
libc.dlsym.restype = ctypes.c_void_p
address = libc.dlsym(None, b"_ZNSt10filesystem10remove_allERKNS_7__cxx114pathE")
info = Info()
print(libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) and info.fname.decode() if address else "none")
"""


def defining_library(imports: str) -> str:
    done = subprocess.run([sys.executable, "-c", WHO_DEFINES.format(imports=imports)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_gpt_aot_before_torch_binds_filesystem_to_libstdcxx():
    assert "libstdc++.so" in defining_library("import gpt_aot\nimport torch")


def test_torch_alone_leaves_it_to_its_own_dependencies():
    # The case gpt_aot's import order exists for: torch's libraries are loaded locally, so the global
    # lookup has no libstdc++ of its own, and each library searches its dependencies, libtorch first.
    assert "libstdc++.so" not in defining_library("import torch")
