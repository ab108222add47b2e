"""torch's own BLAS inside R: the Python half of the R package ampkit's import-order fix.

R loads a BLAS of its own (Debian's reference BLAS, a dependency of libR.so) before Python
starts. A torch imported afterwards binds its float32 matrix products (``sgemm_``) to that BLAS
instead of the MKL inside libtorch: 15-40x slower, and not bit-identical to Python. Loaded with
``RTLD_DEEPBIND``, torch's libraries look up their own symbols first.

The R package runs :func:`install` right after reticulate starts Python (a "reticulate.onPyInit"
hook set by ``library(ampkit)``, or at once when Python already runs). From then on, whoever
imports torch (``reticulate::import("torch")``, ampkit, any module) imports it with
``RTLD_DEEPBIND``. :func:`foreign_blas` tells whether a torch imported *before* that binds to
another library's BLAS (ampkit's first call then warns).

This module imports nothing heavy (not torch, not ampkit), so that the hook costs nothing
until torch is imported. Linux only (``os.RTLD_DEEPBIND``); elsewhere both are no-ops.
"""

import ctypes
import os
import struct
import sys

# Set on the torch module that the finder imported (with RTLD_DEEPBIND).
MARK = "_ampkit_r_own_blas"


class OwnBlasFinder:
    """A meta path finder for the top-level module ``torch`` only: it finds torch's spec with
    the other finders and runs the module's code with ``RTLD_DEEPBIND`` added to the dlopen
    flags, so that every shared library torch's import loads (``torch._C``, ``libtorch_cpu``)
    resolves its own symbols first."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_with_own_blas(module):
            flags = sys.getdlopenflags()
            sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
            try:
                exec_module(module)
                setattr(module, MARK, True)
            finally:
                sys.setdlopenflags(flags)
                loader.__dict__.pop("exec_module", None)

        # An attribute of this loader object only: its class and every other import stay as
        # they are.
        loader.exec_module = exec_with_own_blas
        return spec


def install():
    """Puts the finder first on ``sys.meta_path`` (once). Returns whether torch is already
    imported and was not imported by the finder: then it is too late, and ampkit's first call
    asks :func:`foreign_blas`."""
    if hasattr(os, "RTLD_DEEPBIND") and not any(
            type(f).__name__ == OwnBlasFinder.__name__ for f in sys.meta_path):
        sys.meta_path.insert(0, OwnBlasFinder())
    torch = sys.modules.get("torch")
    return torch is not None and not getattr(torch, MARK, False)


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _library_of(address):
    """The path of the shared library that holds `address`, or None."""
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not address or not libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)):
        return None
    return os.path.realpath(info.dli_fname.decode()) if info.dli_fname else None


def _got_offsets(path, symbol):
    """The offsets (from the load address) of the GOT slots through which the ELF shared
    library `path` calls `symbol`: its relocations against that symbol, read from the file."""
    with open(path, "rb") as f:
        header = f.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            return []  # not a little-endian 64-bit ELF file
        shoff, = struct.unpack_from("<Q", header, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize)
                    for i in range(shnum)]

        def read(section):
            f.seek(section[4])
            return f.read(section[5])

        slots = []
        names = {}  # symbol table section -> the indexes of its symbols named `symbol`
        for sec in sections:
            if sec[1] != 4:  # SHT_RELA
                continue
            if sec[6] not in names:
                symtab = sections[sec[6]]
                strtab = read(sections[symtab[6]])
                wanted = symbol.encode() + b"\0"
                # every place the name starts (a string table may share it as another's suffix)
                starts, at = set(), strtab.find(wanted)
                while at >= 0:
                    starts.add(at)
                    at = strtab.find(wanted, at + 1)
                names[sec[6]] = {i for i, (n,) in enumerate(struct.iter_unpack("<I20x",
                                                                             read(symtab)))
                                 if n in starts}
            index = names[sec[6]]
            if index:
                slots += [offset for offset, info, _ in struct.iter_unpack("<QQq", read(sec))
                          if info >> 32 in index]
        return slots


def foreign_blas():
    """None when torch's float32 matrix products use torch's own BLAS (or this cannot tell),
    else the path of the library whose ``sgemm_`` they call. Exact: it reads where
    libtorch_cpu's call of ``sgemm_`` was bound (its GOT slot), after one float32 product."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(torch, MARK, False) or not sys.platform.startswith("linux"):
        return None
    try:
        lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
        a = torch.ones(16, 16)
        torch.mm(a, a)  # binds the call of sgemm_, if it is bound lazily
        # dlopen of a loaded library returns its link_map, whose first field is the load address
        handle = ctypes.CDLL(lib, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)._handle
        base = ctypes.c_void_p.from_address(handle).value or 0
        own = os.path.realpath(lib)
        for offset in _got_offsets(own, "sgemm_"):
            target = _library_of(ctypes.c_void_p.from_address(base + offset).value)
            if target is not None and target != own:
                return target
    except Exception:  # noqa: BLE001  (a diagnosis must never break ampkit's first call)
        return None
    return None
