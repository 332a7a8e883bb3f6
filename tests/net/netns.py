"""Hosts on a network a test can break: Linux network namespaces on one bridge.

A :class:`Network` is a bridge in the root namespace (which holds the database's address) and
a :class:`Host` per namespace, joined to the bridge by a veth pair. Faults are real ones on
the path: every packet between the host and the database dropped silently (no reset, no
close, the peers' sockets stay open) or the host's link taken down. (``tc netem`` would be
the usual tool; kernels without it, like this machine's, are served by neighbour entries,
and latency is added by :mod:`tests.net.delay`.)

Names carry a random id of the run (interface names are at most 15 characters), so runs on
one machine never collide; :meth:`Network.close` removes everything, and a new network first
removes what runs that were killed left behind.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

NOWHERE = "02:00:00:00:00:01"
"""A hardware address no interface has: frames sent to it are delivered to no one."""
PREFIX = "tickwork-net"
"""Namespace names start with this, then the pid of the run that made them."""


def unavailable() -> str | None:
    """Why namespaces cannot be made here (None when they can)."""
    if shutil.which("ip") is None:
        return "the netns tests need iproute2 (ip)"
    if os.geteuid() != 0:
        return "the netns tests need root (ip netns add)"
    probe = f"{PREFIX}-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"network namespaces cannot be made here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ip ARGS``; raises with ip's own message when it fails and ``check``."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


LOCK = Path("/run/lock/tickwork-netns.lock")
"""Held while a run picks its subnet and gives the bridge its address, so two runs starting
at once cannot pick the same one."""


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 under 10.213.0.0/16 that no interface of this machine uses (call under LOCK)."""
    used = ip("-o", "-4", "addr", "show").stdout
    for _ in range(200):
        subnet = ipaddress.ip_network(f"10.213.{secrets.randbelow(250) + 1}.0/24")
        if f" 10.213.{subnet.network_address.packed[2]}." not in used:
            return subnet
    raise RuntimeError("no free /24 under 10.213.0.0/16")


def remove_leftovers() -> None:
    """Remove the namespaces and bridges of runs whose process is gone (killed runs)."""
    for line in ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(PREFIX + "-"):
            owner = name.split("-")[2]
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                ip("netns", "del", name, check=False)
    for line in ip("-o", "link", "show", "type", "bridge").stdout.splitlines():
        if f"alias {PREFIX}-" in line:
            bridge = line.split(":")[1].strip()
            owner = line.split(f"alias {PREFIX}-")[1].split()[0]
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                ip("link", "del", bridge, check=False)


@dataclass
class Host:
    """One namespace: its name, its address, and the two ends of its link."""

    name: str
    address: str
    outside: str
    """The veth end in the root namespace (on the bridge): packets *to* the host leave here."""
    inside: str = "eth0"
    """The veth end in the namespace: packets *from* the host leave here."""

    def command(self, *argv: str) -> list[str]:
        """``argv`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def partition(self, bridge: str, gateway: str) -> None:
        """Drop every packet between the host and the database's address silently: each side
        is told (a permanent neighbour entry) that the other has a hardware address no one
        has, so senders send as usual, the frames reach no one, nothing answers, nothing
        resets, and both ends keep their carrier and their open sockets."""
        ip("neigh", "replace", self.address, "lladdr", NOWHERE, "dev", bridge, "nud", "permanent")
        ip("-n", self.name, "neigh", "replace", gateway, "lladdr", NOWHERE, "dev", self.inside,
           "nud", "permanent")  # fmt: skip

    def cut(self) -> None:
        """Take the host's link down (its end sees no carrier; frames go nowhere)."""
        ip("link", "set", self.outside, "down")

    def heal(self, bridge: str, gateway: str) -> None:
        """Undo :meth:`partition` and :meth:`cut` (the neighbours are learnt again)."""
        ip("link", "set", self.outside, "up")
        ip("neigh", "del", self.address, "dev", bridge, check=False)
        ip("-n", self.name, "neigh", "del", gateway, "dev", self.inside, check=False)


NO_SUBNET = ipaddress.IPv4Network("0.0.0.0/32")


@dataclass
class Network:
    """A bridge holding ``gateway`` (where the database listens) and the hosts on it."""

    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    subnet: ipaddress.IPv4Network = NO_SUBNET
    """Chosen by :meth:`open`."""
    hosts: list[Host] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"twb{self.run_id}"

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    def open(self) -> Network:
        remove_leftovers()
        ip("link", "add", self.bridge, "type", "bridge")
        ip("link", "set", self.bridge, "alias", f"{PREFIX}-{os.getpid()}")
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        with LOCK.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.subnet = _free_subnet()
            ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        return self

    def add_host(self) -> Host:
        """A new namespace on the bridge, with its own address."""
        n = len(self.hosts) + 1
        name = f"{PREFIX}-{os.getpid()}-{self.run_id}-h{n}"
        host = Host(name, str(self.subnet.network_address + 1 + n), f"tw{self.run_id}h{n}")
        self.hosts.append(host)
        ip("netns", "add", name)
        ip("link", "add", host.outside, "type", "veth", "peer", "name", f"tw{self.run_id}p{n}")
        ip("link", "set", f"tw{self.run_id}p{n}", "netns", name)
        ip("-n", name, "link", "set", f"tw{self.run_id}p{n}", "name", host.inside)
        ip("-n", name, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0")
        ip("-n", name, "link", "set", "eth0", "up")
        ip("-n", name, "link", "set", "lo", "up")
        ip("link", "set", host.outside, "master", self.bridge)
        ip("link", "set", host.outside, "up")
        return host

    def partition(self, host: Host) -> None:
        """Silently drop every packet between ``host`` and the database's address."""
        host.partition(self.bridge, self.gateway)

    def heal(self, host: Host) -> None:
        """Remove every fault of ``host``'s path."""
        host.heal(self.bridge, self.gateway)

    def remove_hosts(self) -> None:
        """Delete every host's namespace (its veth pair goes with it)."""
        while self.hosts:
            host = self.hosts.pop()
            ip("netns", "del", host.name, check=False)
            ip("link", "del", host.outside, check=False)
            ip("neigh", "del", host.address, "dev", self.bridge, check=False)  # a partition's

    def close(self) -> None:
        self.remove_hosts()
        ip("link", "del", self.bridge, check=False)
