"""A cgroup v2 device program: what denies a replica the node's other GPUs where there is no devices file.

Cgroup v2 has no ``devices.deny``: the kernel asks the ``BPF_PROG_TYPE_CGROUP_DEVICE`` programs attached to a
process's group and its ancestors at each open and ``mknod`` of a device file, and refuses (EPERM) where one says
0. runc and systemd write theirs the same way. Ours is a few instructions, written out here rather than compiled
(no clang, no libbpf, no BPF helper on a node), that say 0 for a character device of the GPUs' major and one of
the denied minors, and 1 for anything else: what the v1 group denies, no more. It is attached with
``BPF_F_ALLOW_MULTI``, so a program an ancestor has (a container's allow-list, systemd's ``DevicePolicy``) still
runs, and access needs both to agree. The group holds the program once attached: the launcher closes its fd, and
the kernel frees the program with the group.

Through ``ctypes`` and the raw ``bpf(2)`` syscall (x86_64 and aarch64). ``ctypes`` costs a start ~4 ms to import:
it is imported at the first attach, or ahead by a seat that holds a v2 devices group (:func:`prepare`).
"""

from __future__ import annotations

import os
import struct

_NR_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine)
_PROG_LOAD, _PROG_ATTACH = 5, 8  # bpf(2) commands
_PROG_TYPE_CGROUP_DEVICE, _ATTACH_CGROUP_DEVICE = 15, 6
_F_ALLOW_MULTI = 2
_DEV_CHAR = 2  # the low 16 bits of bpf_cgroup_dev_ctx.access_type: BPF_DEVCG_DEV_CHAR
# the effective capabilities loading and attaching the program takes: CAP_SYS_ADMIN (or CAP_BPF, Linux 5.8+),
# and CAP_NET_ADMIN, which kernels before 5.7 asked of every attach
_CAP_NET_ADMIN, _CAP_SYS_ADMIN, _CAP_BPF = 12, 21, 39


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, src << 4 | dst, off, imm)


def program(major: int, deny: list[int]) -> bytes:
    """The program's instructions: 0 (deny) for ``c major:m`` with ``m`` in ``deny``, else 1."""
    n = len(deny)
    code = [_insn(0x61, 2, 1, 0),                    # r2 = ctx->access_type
            _insn(0x57, 2, imm=0xFFFF),              # r2 &= 0xffff: the device's type
            _insn(0x61, 3, 1, 4),                    # r3 = ctx->major
            _insn(0x61, 4, 1, 8),                    # r4 = ctx->minor
            _insn(0x55, 2, off=n + 1, imm=_DEV_CHAR),  # not a character device: allow
            _insn(0x55, 3, off=n, imm=major)]        # another major: allow
    code += [_insn(0x15, 4, off=n - i + 1, imm=m) for i, m in enumerate(deny)]  # a denied minor: deny
    code += [_insn(0xB7, 0, imm=1), _insn(0x95),     # allow: return 1
             _insn(0xB7, 0, imm=0), _insn(0x95)]     # deny: return 0
    return b"".join(code)


def usable() -> bool:
    """Whether this process may load and attach a device program (root, with the capabilities it takes)."""
    if _NR_BPF is None:
        return False
    try:
        with open("/proc/self/status") as f:
            caps = next((int(line.split()[1], 16) for line in f if line.startswith("CapEff:")), 0)
    except OSError:
        return False
    return bool(caps >> _CAP_NET_ADMIN & 1) and bool(caps >> _CAP_SYS_ADMIN & 1 or caps >> _CAP_BPF & 1)


def attach(group: str, major: int, deny: list[int]) -> None:
    """Deny ``c major:m`` for each ``m`` of ``deny`` to the processes of the v2 group at ``group``; raises
    ``OSError`` where the kernel refuses (an ancestor's program attached without ``BPF_F_ALLOW_MULTI``)."""
    ctypes = prepare()
    code = program(major, deny)
    insns = ctypes.create_string_buffer(code, len(code))
    license_ = ctypes.create_string_buffer(b"Apache-2.0")
    prog = _bpf(_PROG_LOAD, struct.pack("<IIQQIIQII16sII", _PROG_TYPE_CGROUP_DEVICE, len(code) // 8,
                                        ctypes.addressof(insns), ctypes.addressof(license_), 0, 0, 0, 0, 0,
                                        b"trainyard_gpus", 0, _ATTACH_CGROUP_DEVICE))
    try:
        fd = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _bpf(_PROG_ATTACH, struct.pack("<IIIII", fd, prog, _ATTACH_CGROUP_DEVICE, _F_ALLOW_MULTI, 0))
        finally:
            os.close(fd)
    finally:
        os.close(prog)


_libc = None


def prepare():  # noqa: ANN201  (the ctypes module, which is not imported here before)
    """``ctypes``, imported, and the C library found: off the start's path where a seat calls it ahead."""
    global _libc
    import ctypes

    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return ctypes


def _bpf(cmd: int, attr: bytes) -> int:
    ctypes = prepare()
    buf = ctypes.create_string_buffer(attr, len(attr))
    found = _libc.syscall(_NR_BPF, cmd, buf, len(attr))
    if found < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"bpf: {os.strerror(err)}")
    return found
