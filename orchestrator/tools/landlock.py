"""Landlock through raw syscalls (ctypes): a ruleset built in the parent, enforced in the child.

The fallback sandbox where namespaces are unavailable. The parent builds the ruleset (read
and execute under the system directories, everything under the workspace, no TCP, no signals
or abstract sockets outside the domain) and the child calls `enforce` between fork and exec.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable
from functools import cache
from typing import Final

from orchestrator.errors import OrchestratorError

__all__ = ["LandlockUnavailable", "Ruleset", "abi_version", "build_ruleset"]

# Generic syscall numbers: the same on x86_64 and arm64.
_CREATE_RULESET: Final = 444
_ADD_RULE: Final = 445
_RESTRICT_SELF: Final = 446
_CREATE_RULESET_VERSION: Final = 1
_RULE_PATH_BENEATH: Final = 1
_PR_SET_NO_NEW_PRIVS: Final = 38

_EXECUTE: Final = 1 << 0
_WRITE_FILE: Final = 1 << 1
_READ_FILE: Final = 1 << 2
_READ_DIR: Final = 1 << 3
_TRUNCATE: Final = 1 << 14
_IOCTL_DEV: Final = 1 << 15
_FILE_RIGHTS: Final = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_READ_EXEC: Final = _EXECUTE | _READ_FILE | _READ_DIR
# Minimum ABI for each group of rights: 1 = bits 0-12, 2 = REFER, 3 = TRUNCATE, 5 = IOCTL_DEV.
_FS_BY_ABI: Final = ((1, (1 << 13) - 1), (2, 1 << 13), (3, _TRUNCATE), (5, _IOCTL_DEV))
_NET_BIND_TCP: Final = 1 << 0
_NET_CONNECT_TCP: Final = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0
_SCOPE_SIGNAL: Final = 1 << 1


class LandlockUnavailable(OrchestratorError):
    """The kernel cannot enforce the ruleset asked for."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"landlock unavailable: {reason}")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc: Final = ctypes.CDLL(None, use_errno=True)
_syscall: Final = _libc.syscall
_syscall.restype = ctypes.c_long
_prctl: Final = _libc.prctl
_prctl.restype = ctypes.c_int


@cache
def abi_version() -> int:
    """Return the kernel's Landlock ABI version, 0 when it has none (probed once)."""
    result = _syscall(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(result), 0)


class Ruleset:
    """An open Landlock ruleset fd: pass to the child's `enforce`, then `close` in the parent."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def enforce(self) -> None:
        """Restrict the calling process (run in the child between fork and exec); raises OSError."""
        if _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if _syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(self.fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
        os.close(self.fd)

    def close(self) -> None:
        """Close the parent's copy of the ruleset fd."""
        try:
            os.close(self.fd)
        except OSError:
            pass


def build_ruleset(*, read_only: Iterable[str], writable: Iterable[str], rw_files: Iterable[str], network: bool) -> Ruleset:
    """Return a ruleset allowing read/execute under `read_only`, everything under `writable`.

    `rw_files` are single files (e.g. `/dev/null`) readable and writable. Missing paths are
    skipped. Without `network`, TCP bind and connect are refused (ABI 4+, else this raises
    `LandlockUnavailable`: omission is not a grant). Signals and abstract unix sockets
    never reach outside the sandbox where the kernel supports scoping (ABI 6+).
    """
    abi = abi_version()
    if abi < 1:
        raise LandlockUnavailable("the kernel has no Landlock (ABI 0)")
    if not network and abi < 4:
        raise LandlockUnavailable(f"network = false needs Landlock ABI 4+, the kernel has {abi}")
    handled_fs = 0
    for minimum, rights in _FS_BY_ABI:
        if abi >= minimum:
            handled_fs |= rights
    attr = _RulesetAttr(
        handled_access_fs=handled_fs,
        handled_access_net=0 if network else _NET_BIND_TCP | _NET_CONNECT_TCP,
        scoped=_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0,
    )
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16 if abi >= 4 else 8
    fd = int(_syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)))
    if fd < 0:
        raise LandlockUnavailable(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    ruleset = Ruleset(fd)
    try:
        for path in read_only:
            _allow(ruleset, path, _READ_EXEC, handled_fs)
        for path in writable:
            _allow(ruleset, path, handled_fs, handled_fs)
        for path in rw_files:
            _allow(ruleset, path, _READ_FILE | _WRITE_FILE | _TRUNCATE, handled_fs)
    except BaseException:
        ruleset.close()
        raise
    return ruleset


def _allow(ruleset: Ruleset, path: str, rights: int, handled: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path this system lacks grants nothing
    try:
        if not stat.S_ISDIR(os.fstat(target).st_mode):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(allowed_access=rights & handled, parent_fd=target)
        done = _syscall(ctypes.c_long(_ADD_RULE), ctypes.c_int(ruleset.fd), ctypes.c_int(_RULE_PATH_BENEATH),
                        ctypes.byref(rule), ctypes.c_uint32(0))
        if done != 0:
            raise LandlockUnavailable(f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(target)
