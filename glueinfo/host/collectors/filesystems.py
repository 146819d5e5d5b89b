"""filesystems: local and remote mounts with size and available space (MB).

Mounts come from /proc/self/mounts, so network filesystems are kept
(psutil.disk_partitions(all=False) drops them).  Pseudo and memory-backed
filesystems are left out (see PSEUDO and the README for why).  A mount point
mounted over keeps only its visible (last) mount, so a disk hidden under a
tmpfs is left out too.  Sizes of remote mounts are
asked with a short timeout so a dead server cannot stall the probe; a mount
whose size cannot be had is still listed, with unknown sizes.
"""

from __future__ import annotations

from typing import Optional

from glueinfo.core.model import FileSystem
from glueinfo.host.collect import CollectContext, Collector
from glueinfo.host.linux import LinuxHost, Mount

MB = 1 << 20

# Kernel interfaces, memory-backed or per-session mounts: no storage a job could
# use, or storage that comes and goes (tmpfs /run/user/N, container layers,
# snap and container-image squashfs) and would make identical hosts differ.
PSEUDO = frozenset({
    "rootfs", "proc", "sysfs", "devtmpfs", "devpts", "tmpfs", "ramfs", "cgroup", "cgroup2", "mqueue",
    "debugfs", "tracefs", "securityfs", "pstore", "efivarfs", "bpf", "configfs", "fusectl",
    "hugetlbfs", "autofs", "binfmt_misc", "nsfs", "rpc_pipefs", "nfsd", "selinuxfs", "devfs",
    "usbfs", "squashfs", "fuse.lxcfs", "fuse.gvfsd-fuse", "fuse.portal", "fuse.snapfuse",
    "overlay",  # except as "/" (a container's root): see is_pseudo
})

# Filesystems whose storage is on another machine.
REMOTE = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "fhgfs", "ceph",
    "fuse.ceph", "fuse.ceph-fuse", "glusterfs", "fuse.glusterfs", "afs", "fuse.sshfs", "sshfs",
    "9p", "virtiofs", "panfs", "pvfs2", "orangefs", "wekafs", "ncpfs", "davfs", "fuse.davfs2",
    "fuse.s3fs", "fuse.rclone", "fuse.gcsfuse", "fuse.juicefs", "fuse.cvmfs2",
})
SSH_TYPES = frozenset({"fuse.sshfs", "sshfs"})

# Single files a container engine bind-mounts into every container: not filesystems.
CONTAINER_FILES = frozenset({"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"})


def is_pseudo(mount: Mount) -> bool:
    if mount.mount_point in CONTAINER_FILES:
        return True
    if mount.fs_type == "overlay":
        return mount.mount_point != "/"  # a container's root is its real storage; other layers come and go
    return mount.fs_type in PSEUDO


def is_remote(mount: Mount) -> bool:
    # CernVM-FS mounts as plain "fuse" with device "cvmfs2".
    return mount.fs_type in REMOTE or (mount.fs_type == "fuse" and mount.device == "cvmfs2")


def remote_server(device: str, fs_type: str) -> Optional[str]:
    """The server part of a remote mount's device: ``srv:/export`` (NFS, Gluster,
    Lustre NIDs ``a@o2ib:b@o2ib:/fs``, Ceph monitors), ``//srv/share`` (CIFS),
    ``user@srv:path`` (sshfs); None when the device names no server (GPFS, BeeGFS, AFS)."""
    if device.startswith("//"):
        host = device[2:].split("/", 1)[0]
    elif ":/" in device:
        host = device.rpartition(":/")[0]
    elif fs_type in SSH_TYPES and ":" in device:
        host = device.split(":", 1)[0]
    else:
        return None
    if fs_type in SSH_TYPES:
        host = host.rpartition("@")[2]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or None


def collect(ctx: CollectContext) -> list[FileSystem]:
    host = LinuxHost(ctx.host_root)
    visible: dict[str, Mount] = {}
    for mount in host.mounts():
        visible.pop(mount.mount_point, None)  # mounted over: the later mount is the one seen
        visible[mount.mount_point] = mount
    visible = {mp: m for mp, m in visible.items() if not is_pseudo(m)}  # a tmpfs over /tmp hides the disk below
    remote = frozenset(mp for mp, m in visible.items() if is_remote(m))
    space = host.space(list(visible), slow=remote)
    found = []
    for mount_point, mount in visible.items():
        size = space.get(mount_point)
        found.append(FileSystem(
            mount_point=mount_point,
            device=mount.device,
            fs_type=mount.fs_type,
            read_only="ro" in mount.options,
            remote=mount_point in remote,
            server=remote_server(mount.device, mount.fs_type) if mount_point in remote else None,
            size_mb=size.total // MB if size else None,
            available_mb=size.available // MB if size else None,
        ))
    return found


COLLECTOR = Collector(name="filesystems", collect=collect, default_enabled=True, field="filesystems",
                      description="local and remote mounts: device or server, type, read-only, size and free MB")
