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
driver). A replica's GPU ids are NVML indices (what ``CUDA_VISIBLE_DEVICES`` gets): GPU ``N`` is ``/dev/nvidiaN``,
as the driver numbers its device files in the PCI order NVML enumerates (:func:`minor_of` is the one place
that says so). An id that is not a number (a UUID) cannot be placed: then nothing is denied, and the job's log
says why.

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


def minor_of(gpu: str) -> int | None:
    """The minor number of the device file of GPU ``gpu`` (an NVML index), or None where it is not one."""
    return int(gpu) if str(gpu).isdigit() else None


def denied(config: object) -> list[int] | None:
    """The minors of the GPUs of the node a replica of ``config`` was not given: [] where none; None where its
    GPU ids cannot be placed among the device files (see the module's docstring)."""
    node = node_gpus(getattr(config, "dev_root", DEV))
    if not node:
        return []
    own = [minor_of(g) for g in getattr(config, "gpus", None) or ()]
    if None in own:
        return None
    return [m for m in node if m not in own]


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
        say(f"GPU ids {', '.join(map(str, config.gpus))} name no device file: the node's other GPUs are not "
            "fenced off, only CUDA_VISIBLE_DEVICES says which are this job's")
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
