"""A replica's GPUs, enforced by the kernel: its whole tree in a devices cgroup that denies the node's other GPUs.

``CUDA_VISIBLE_DEVICES`` only asks: a job that unsets it, or opens ``/dev/nvidiaN`` itself, reaches every GPU of
the node, other jobs' included. As Slurm does with ``ConstrainDevices=yes`` (and Kubernetes' device plugins, which
hand a container only its own device files), the replica's tree runs in a devices cgroup that denies ``rwm`` on
the character devices of the node's GPUs that it was not given: opening one fails with EPERM, and so does a
``mknod`` of a copy. ``/dev/nvidiactl`` (195:255), ``/dev/nvidia-modeset`` (195:254) and ``/dev/nvidia-uvm*`` (a
major of their own) stay allowed, as Slurm leaves them: CUDA needs them, and they reach no GPU by themselves. A
replica with no GPU on a GPU node is denied all of them; one given every GPU of its node, or on a node without
any, joins no group (a move costs the start ~10 ms: launch.seat). Made, joined, removed and swept as the memory
group is (:mod:`trainyard.launch.cgroup`), and held ahead by a seat where the node has GPUs (launch.seat).

The node's GPUs are the ``nvidia<N>`` character devices of major 195 in ``dev_root`` (``/dev``; a test points it
at a folder of its own nodes), looked for only where ``nvidiactl`` is there (one ``stat`` on a node without the
driver). A replica's GPU ids are NVML indices (what ``CUDA_VISIBLE_DEVICES`` gets, in ``PCI_BUS_ID`` order), or
UUIDs where Ray hands them out (``ray.get_gpu_ids()`` on a node started with UUIDs in ``CUDA_VISIBLE_DEVICES``).
The device file of a GPU is ``/dev/nvidia<minor>``, the driver's minor number, which on many multi-GPU servers is
not its index: the driver numbers its files in the order it probed the boards, NVML its indices in PCI order.
So the minors are NVML's (``nvmlDeviceGetMinorNumber``), read once a launcher process (:func:`minors`; a zygote
reads them before it forks, so its launchers inherit them), and only where the node has GPU device files and
the replica was given some: a CPU node never loads NVML. Where NVML does not load, GPU ``N`` is taken to be
``/dev/nvidiaN`` (right where the two orders agree), and the launcher says so once on its own log. These are
read on the node rather than reported with its GPUs at detection and passed in the launch config: Ray decides
a replica's GPUs on the node itself, and the driver that numbers the files is the node's, so the node's NVML is
the one source that is right for every engine. An id NVML does not know (nor a number, without NVML) cannot be
placed: then nothing is denied, and the job's log says why. Nor is a MIG device (``MIG-...``) fenced: its
GPU's other MIG devices share its device file (they are told apart by ``/dev/nvidia-caps``), so the job's log
says that its GPU is not fenced, and CUDA_VISIBLE_DEVICES alone separates it from the node's others.

- ``cgroup-v1``: ``<root>/devices`` is the v1 devices controller and we may create groups in it (root). The group
  is ``<root>/devices/<our group>/trainyard/<attempt>-r<replica>``; it starts with its parent's list (allow all,
  or a container's own) and gets ``c 195:N rwm`` in ``devices.deny`` for each GPU denied.
- ``cgroup-v2``: ``<root>`` is a v2 hierarchy (``cgroup.controllers``) where we may make groups and move processes,
  and we have the capabilities to load a BPF program (root). There is no devices file: the replica's one v2 group
  (its memory group's, where it has one; ``<root>/trainyard/<attempt>-r<replica>`` otherwise) gets a
  ``BPF_PROG_TYPE_CGROUP_DEVICE`` program that denies the same device files, as runc attaches one
  (:mod:`trainyard.launch.devprog`). No controller is needed for it, so a delegated tree without any will do.
- anything else (not root, no devices controller on v1, a kernel without BPF): nothing is made, and the GPUs are
  separated by ``CUDA_VISIBLE_DEVICES`` alone, as before. The launcher says so once on its own log where there
  was something to deny, and ``trainyard doctor`` says so ("gpu devices"). Jobs in an image get only their GPUs
  from the runtime (``--gpus device=...``: launch.container), whatever the host.

The group, its ``devices.deny`` and its ``cgroup.procs`` are root's: a job run as an account (``run_as``) can
neither allow itself a device nor move itself out. A job run as root could, as it could leave any of its groups.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any

from trainyard.launch import cgroup
from trainyard.launch.cgroup import MOUNT, SHELL, V1, V2

DEV = "/dev"
MAJOR = 195  # the NVIDIA driver's character major: /dev/nvidia0..N, nvidiactl (255), nvidia-modeset (254)
CONTROL = "nvidiactl"  # there whenever the driver is loaded: no such file, no GPU to look for

_say = cgroup.SayOnce()  # "GPUs not fenced here": once a launcher, on its own log


def detect(root: str = MOUNT) -> str | None:
    """How this host can fence a replica's GPUs: ``V1`` (a devices file), ``V2`` (a device program), or None where
    it cannot. A hybrid host's v1 controller comes first: its other groups are v1 groups too."""
    if os.path.isfile(os.path.join(root, "devices", "devices.deny")):  # v1, or a hybrid host's v1 half
        return cgroup.detect_controller(root, "devices", "devices.deny")
    if os.access(SHELL, os.X_OK) and os.path.isfile(os.path.join(root, "cgroup.controllers")) and \
            cgroup.v2_movable(root):
        from trainyard.launch import devprog  # here only: a node without GPUs never imports it

        return V2 if devprog.usable() else None
    return None


def node_gpus(dev_root: str | None = DEV) -> list[int]:
    """The minor numbers of this node's GPU device files in ``dev_root``, sorted; [] where it has none."""
    if not dev_root or not os.path.exists(os.path.join(dev_root, CONTROL)):
        return []
    found = []
    try:
        entries = os.scandir(dev_root)
    except OSError:
        return []
    with entries:
        for entry in entries:
            if not entry.name.startswith("nvidia") or not entry.name[6:].isdigit():
                continue
            try:
                st = entry.stat()
            except OSError:
                continue
            if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == MAJOR:
                found.append(os.minor(st.st_rdev))
    return sorted(found)


_UNREAD = object()
_known: "dict[str, int] | None | object" = _UNREAD  # minors(): read once a process, inherited by a zygote's forks
_guessed = cgroup.SayOnce()  # "NVML did not load: index = minor", once a launcher, on its own log
MIG = "MIG-"  # the UUID prefix of a MIG device (a slice of a GPU): "MIG-<uuid>", or "MIG-GPU-<uuid>/<gi>/<ci>"


def read_minors(nvml: Any = None) -> dict[str, int] | None:
    """Each id a replica of this node may be given (NVML index, GPU UUID) -> the minor number of its GPU's device
    file, as the driver says; None where NVML does not load. ``nvml``: the binding (``pynvml``), a seam for tests."""
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no library, no driver: the caller falls back to index = minor
        return None
    found: dict[str, int] = {}
    try:
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
            except Exception:  # noqa: BLE001 - a GPU NVML cannot answer for (fallen off the bus): left unplaced
                continue
            found[str(index)] = minor
            try:
                uuid = nvml.nvmlDeviceGetUUID(handle)
            except Exception:  # noqa: BLE001 - placed by its index still
                continue
            found[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = minor
    except Exception:  # noqa: BLE001 - NVML loaded yet cannot count its GPUs: as if it had not loaded
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return found


def minors() -> dict[str, int] | None:
    """:func:`read_minors`, read once in this process (the NVML library loads in tens of milliseconds, and its
    first call on a node without the persistence daemon may take seconds)."""
    global _known
    if _known is _UNREAD:
        _known = read_minors()
    return _known  # type: ignore[return-value]


def minor_of(gpu: str, known: dict[str, int] | None) -> int | None:
    """The minor number of the device file of GPU ``gpu``: ``known``'s (:func:`minors`) where NVML answered; the
    index itself where it did not; None where it is neither (see the module's docstring)."""
    if known is not None:
        return known.get(str(gpu))
    return int(gpu) if str(gpu).isdigit() else None


def denied(config: object) -> list[int] | None:
    """The minors of the GPUs of the node a replica of ``config`` was not given: [] where none; None where its
    GPU ids cannot be placed among the device files (see the module's docstring)."""
    node = node_gpus(getattr(config, "dev_root", DEV))
    if not node:
        return []
    gpus = [str(g) for g in getattr(config, "gpus", None) or ()]
    if not gpus:  # denied them all: no need to know which is which
        return node
    if any(g.startswith(MIG) for g in gpus):
        return None
    known = minors()
    if known is None:
        _guessed("trainyard: NVML did not load here: GPU N is taken to be /dev/nvidiaN for its devices cgroup, "
                 "which holds only where the driver numbered its device files in PCI order")
    own = [minor_of(g, known) for g in gpus]
    if None in own:
        return None
    return [m for m in node if m not in own]


def unfenced(gpus: list[str]) -> str:
    """What the job's log says where its GPUs ``gpus`` could not be fenced (:func:`denied` said None)."""
    mig = [g for g in gpus if str(g).startswith(MIG)]
    if mig:
        return (f"GPU {', '.join(mig)} is a MIG device, whose GPU's other MIG devices share its device file: the "
                "GPU is not fenced, and only CUDA_VISIBLE_DEVICES says which of the node's GPUs are this job's")
    return (f"GPU ids {', '.join(map(str, gpus))} name no device file: the node's other GPUs are not fenced off, "
            "only CUDA_VISIBLE_DEVICES says which are this job's")


class DevicesGroup(cgroup.Group):
    """One replica's devices cgroup: :meth:`make` it, start the command through
    :func:`trainyard.launch.cgroup.wrap` with its other groups, :meth:`remove` it at the end. ``owned``: False
    where it is the replica's v2 group of another controller, which removes itself."""

    controller = "devices"  # on v2 no controller: the group gets a device program (see cgroup.enable)

    def __init__(self, path: str, version: str, deny: list[int], owned: bool = True):
        super().__init__(path, owned)
        self.version = version
        self.deny = deny

    @classmethod
    def make(cls, root: str, version: str, name: str, deny: list[int],
             joined: "tuple[cgroup.Group | None, ...]" = ()) -> "DevicesGroup":
        """Create the group denying the GPUs ``deny`` (on v2 in the replica's one group among ``joined`` where it
        has one); raises ``OSError`` when the host refuses."""
        return cls.create(root, version, name, deny, joined=joined)

    def apply_limit(self) -> None:
        """Deny :attr:`deny` (a seat's group is made without: launch.seat). The v1 kernel takes one rule a write;
        on v2 the program is attached once, and holds until the group is removed."""
        if self.version == V2:
            from trainyard.launch import devprog

            devprog.attach(self.path, MAJOR, self.deny)
            return
        for minor in self.deny:
            cgroup.write(self._file("devices.deny"), f"c {MAJOR}:{minor} rwm")


def for_replica(root: str | None, config: object, name: str, say: Callable[[str], None],
                joined: "tuple[cgroup.Group | None, ...]" = ()) -> DevicesGroup | None:
    """The replica's devices cgroup under ``root`` for the GPUs of ``config`` (on v2 its one group among
    ``joined`` where it has one), or None: nothing to deny, or no way to deny it here (said once on the
    launcher's own log), or the host refused (``say`` tells the job's log; its GPUs are then separated by
    ``CUDA_VISIBLE_DEVICES`` alone, as a memory limit falls back to sampling)."""
    if not root:
        return None
    deny = denied(config)
    if deny is None:
        say(unfenced(config.gpus))
        return None
    if not deny:
        return None
    mode = detect(root)
    if mode is None:
        _say("trainyard: no usable devices cgroup here (root, with cgroup v1's devices controller or cgroup v2 and "
             "BPF): a job's GPUs are named by CUDA_VISIBLE_DEVICES only, and it may open the node's others")
        return None
    try:
        return DevicesGroup.make(root, mode, name, deny, joined)
    except OSError as e:
        say(f"cannot make a devices cgroup ({mode}): {e}; only CUDA_VISIBLE_DEVICES says which GPUs are this job's")
        return None
