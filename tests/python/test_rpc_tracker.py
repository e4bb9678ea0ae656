"""Case (d) of issue 14: TVM's Python tracker with several of our `tvmrt rpc-server`s, and TVM's
Python client (on the runtime under test) requesting sessions through it."""

import time

import pytest

import tvm
import tvm.rpc

import rpc_helpers as R

KEY = "tvmrt-test"
N_SERVERS = 3


def wait_for(cond, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return False


def free_count(client):
    return client.summary()["queue_info"].get(KEY, {}).get("free", 0)


@pytest.fixture()
def fleet():
    tr = R.tracker()
    servers = []
    try:
        for i in range(N_SERVERS):
            servers.append(
                R.tvmrt_server(
                    "--tracker", f"{R.HOST}:{tr.port}", "--key", KEY,
                    port=9700 + 20 * i,
                )
            )
        client = tvm.rpc.connect_tracker(R.HOST, tr.port)
        assert wait_for(lambda: free_count(client) == N_SERVERS), client.text_summary()
        yield tr, servers, client
    finally:
        for s in servers:
            s.close()
        tr.close()


def test_tracker_summary_and_spread(fleet):
    _, servers, client = fleet
    summary = client.summary()
    infos = [s for s in summary["server_info"] if s["key"] == f"server:{KEY}"]
    assert sorted(s["addr"][1] for s in infos) == sorted(s.port for s in servers)
    # Sessions held at once go to different servers.
    sessions = [client.request(KEY, session_timeout=60) for _ in range(N_SERVERS)]
    for sess in sessions:
        assert sess.get_function("runtime.GetDeviceAttr")(1, 0, 0) == 1
    assert free_count(client) == 0
    for sess in sessions:
        sess._sess.get_function("CloseRPCConnection")()
    # Each server offers itself again after its session.
    assert wait_for(lambda: free_count(client) == N_SERVERS), client.text_summary()


def test_tracker_server_killed_mid_session(fleet):
    _, servers, client = fleet
    sess = client.request(KEY)
    f = sess.get_function("runtime.GetDeviceAttr")
    assert f(1, 0, 0) == 1
    # The server serving this session logged it.
    serving = [s for s in servers if "session from" in s.output()]
    assert len(serving) == 1, [s.output() for s in servers]
    victim = serving[0]
    victim.kill()
    t0 = time.time()
    with pytest.raises(tvm.error.TVMError):
        f(1, 0, 0)
    assert time.time() - t0 < 30
    # The next request goes to a live server.
    sess2 = client.request(KEY, max_retry=10)
    assert sess2.get_function("runtime.GetDeviceAttr")(1, 0, 0) == 1
    assert sum("session from" in s.output() for s in servers if s is not victim) == 1
