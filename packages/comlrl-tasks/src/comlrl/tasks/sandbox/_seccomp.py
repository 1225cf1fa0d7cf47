"""A seccomp filter for the sandbox worker, built as a classic BPF program (stdlib only).

No libseccomp: the program is packed with ``struct`` and loaded with ``prctl(PR_SET_SECCOMP)``.
It is the wall the Python guard is not: it refuses (``EPERM``) what no generated solution
needs and what would reach past the worker or past its per-process limits. No new processes
(``fork``, ``vfork``, ``clone`` without ``CLONE_THREAD``: threads only), no new namespaces
(``unshare``, ``setns``, namespace flags to ``clone``), no memory outside ``RLIMIT_AS``
(``memfd_create``, ``memfd_secret``, SysV shared memory; nor SysV or POSIX message queues and
semaphore sets, kernel memory a run could fill), no ``fallocate``, no sockets but Unix
ones (and IPv4/IPv6 only inside the run's network namespace), no mounts, ``ptrace`` or
cross-process memory access, no ``pidfd_*`` call, no signals to any process but the worker's
own group, no joining another process group (``setpgid`` to anything but a new group), and no
``fcntl(F_SETOWN)`` (a signal on I/O to a chosen process). ``clone3``, whose flags sit in
memory a filter cannot read, reports ``ENOSYS`` so the C library falls back to ``clone``, whose
flags the filter checks.
"""

import ctypes
import os
import struct

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JSET_K, _JGE_K, _RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
_OFF_NR, _OFF_ARCH, _OFF_ARGS = 0, 4, 16
_F_SETOWN, _F_SETOWN_EX = 8, 15
_X32_BIT = 0x40000000
_CLONE_THREAD = 0x00010000
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME.
_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000
_NAMESPACE_FLAGS |= 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080

# Numbers common to every architecture (the syscalls added since Linux 5.1).
_COMMON = {
    "pidfd_send_signal": 424,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_open": 434,
    "clone3": 435,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "mount_setattr": 442,
    "memfd_secret": 447,
}
_ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "kill": 62, "fcntl": 72, "ptrace": 101, "rt_sigqueueinfo": 129, "mount": 165,
            "umount2": 166, "tkill": 200, "tgkill": 234, "add_key": 248, "request_key": 249,
            "keyctl": 250, "unshare": 272, "rt_tgsigqueueinfo": 297, "perf_event_open": 298,
            "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
            "bpf": 321, "userfaultfd": 323, "clone": 56, "setpgid": 109, "fork": 57,
            "vfork": 58, "memfd_create": 319, "shmget": 29, "shmat": 30, "shmctl": 31,
            "shmdt": 67, "fallocate": 285, "socket": 41, "socketpair": 53, "semget": 64,
            "msgget": 68, "mq_open": 240,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "kill": 129, "fcntl": 25, "ptrace": 117, "rt_sigqueueinfo": 138, "mount": 40,
            "umount2": 39, "tkill": 130, "tgkill": 131, "add_key": 217, "request_key": 218,
            "keyctl": 219, "unshare": 97, "rt_tgsigqueueinfo": 240, "perf_event_open": 241,
            "setns": 268, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
            "bpf": 280, "userfaultfd": 282, "clone": 220, "setpgid": 154,
            "memfd_create": 279, "shmget": 194, "shmctl": 195, "shmat": 196, "shmdt": 197,
            "fallocate": 47, "socket": 198, "socketpair": 199, "mq_open": 180,
            "msgget": 186, "semget": 190,
        },
    ),
}  # fmt: skip
_DENIED = (
    "ptrace", "mount", "umount2", "unshare", "setns", "process_vm_readv", "process_vm_writev",
    "kcmp", "bpf", "userfaultfd", "perf_event_open", "add_key", "request_key", "keyctl",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "process_madvise", "open_tree",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "tkill", "fork", "vfork", "memfd_create",
    "memfd_secret", "shmget", "shmat", "shmctl", "shmdt", "fallocate", "msgget", "semget",
    "mq_open",
)  # fmt: skip
# Signal calls whose first argument names the target: allowed only for the worker itself.
_SIGNALS = ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")

_libc = ctypes.CDLL(None, use_errno=True)


def supported():
    """Why this machine cannot have the filter, or ``""`` when it can."""
    if not os.uname().sysname == "Linux":
        return "not Linux"
    if os.uname().machine not in _ARCHES:
        return f"no syscall table for {os.uname().machine}"
    return ""


def _insn(code, k, jt=0, jf=0):
    return (code, jt, jf, k)


def _socket_block(inet):
    """Instructions that allow a socket family of Unix (and IPv4/IPv6 with ``inet``) only."""
    allowed = (_AF_UNIX, _AF_INET, _AF_INET6) if inet else (_AF_UNIX,)
    body = [_insn(_LD_W_ABS, _OFF_ARGS)]
    for index, family in enumerate(allowed):
        # On a match, jump over the remaining checks and the refusal to the allow.
        body.append(_insn(_JEQ_K, family, len(allowed) - index, 0))
    return body + [_insn(_RET_K, _RET_ERRNO | 1), _insn(_RET_K, _RET_ALLOW)]


def _program(own_pid, inet=False):
    """The filter's instructions for a worker whose pid (and process group) is ``own_pid``.

    ``inet`` allows IPv4 and IPv6 sockets (only where the run has its own network namespace).
    """
    arch, numbers = _ARCHES[os.uname().machine]
    numbers = {**_COMMON, **numbers}
    eperm, enosys = _RET_ERRNO | 1, _RET_ERRNO | 38
    group = (-own_pid) & 0xFFFFFFFF
    pid_arg, second_arg = _OFF_ARGS, _OFF_ARGS + 8  # low 32 bits, little-endian (both arches)
    # Blocks of (syscall number, instructions run when it matches); each block ends in a return.
    blocks = [(numbers[name], [_insn(_RET_K, eperm)]) for name in _DENIED if name in numbers]
    blocks.append((numbers["clone3"], [_insn(_RET_K, enosys)]))
    blocks.append(
        (
            numbers["clone"],
            [
                _insn(_LD_W_ABS, pid_arg),  # the flags
                _insn(_JSET_K, _NAMESPACE_FLAGS, 1, 0),
                _insn(_JSET_K, _CLONE_THREAD, 1, 0),  # a thread; anything else is a process
                _insn(_RET_K, eperm),
                _insn(_RET_K, _RET_ALLOW),
            ],
        )
    )
    for name in ("socket", "socketpair"):
        blocks.append((numbers[name], _socket_block(inet)))
    blocks.append(
        (
            numbers["kill"],
            [
                _insn(_LD_W_ABS, pid_arg),
                _insn(_JEQ_K, 0, 3, 0),
                _insn(_JEQ_K, own_pid, 2, 0),
                _insn(_JEQ_K, group, 1, 0),
                _insn(_RET_K, eperm),
                _insn(_RET_K, _RET_ALLOW),
            ],
        )
    )
    for name in _SIGNALS:
        blocks.append(
            (
                numbers[name],
                [
                    _insn(_LD_W_ABS, pid_arg),
                    _insn(_JEQ_K, own_pid, 1, 0),
                    _insn(_RET_K, eperm),
                    _insn(_RET_K, _RET_ALLOW),
                ],
            )
        )
    blocks.append(
        (
            numbers["setpgid"],
            [
                _insn(_LD_W_ABS, second_arg),
                _insn(_JEQ_K, 0, 1, 0),
                _insn(_RET_K, eperm),
                _insn(_RET_K, _RET_ALLOW),
            ],
        )
    )
    blocks.append(
        (
            numbers["fcntl"],
            [
                _insn(_LD_W_ABS, second_arg),
                _insn(_JEQ_K, _F_SETOWN, 1, 0),
                _insn(_JEQ_K, _F_SETOWN_EX, 0, 1),
                _insn(_RET_K, eperm),
                _insn(_RET_K, _RET_ALLOW),
            ],
        )
    )
    program = [
        _insn(_LD_W_ABS, _OFF_ARCH),
        _insn(_JEQ_K, arch, 1, 0),
        _insn(_RET_K, eperm),  # another ABI's numbers (32-bit calls) mean other syscalls
        _insn(_LD_W_ABS, _OFF_NR),
        _insn(_JGE_K, _X32_BIT, 0, 1),
        _insn(_RET_K, eperm),
    ]
    for number, body in blocks:
        # Skip this block unless the number matches; every block ends in a return.
        program.append(_insn(_JEQ_K, number, 0, len(body)))
        program += body
    program.append(_insn(_RET_K, _RET_ALLOW))
    return program


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(own_pid, inet=False):
    """Load the filter into this process (inherited across exec); OSError if not."""
    reason = supported()
    if reason:
        raise OSError(0, f"seccomp filter: {reason}")
    program = _program(own_pid, inet)
    raw = b"".join(struct.pack("=HBBI", *insn) for insn in program)
    buffer = ctypes.create_string_buffer(raw, len(raw))
    fprog = _Fprog(len(program), ctypes.cast(buffer, ctypes.c_void_p))
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(errno)}")
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_SECCOMP): {os.strerror(errno)}")
