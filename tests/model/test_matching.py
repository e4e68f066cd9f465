"""The send a receive is: the oldest unmatched send of that open file queued on the receiving
socket, never the oldest of the file anywhere; sends end where the kernel says their fds were
freed, by the socket that held them."""

from vmmtui.model.matching import SendQueue
from vmmtui.stream.observed import SocketEnd

#: two connected pairs: a1 ↔ a2, b1 ↔ b2 (socks named as records name them, inodes too)
A1, A2 = SocketEnd(11, 12, sk="a1", peer_sk="a2"), SocketEnd(12, 11, sk="a2", peer_sk="a1")
B1, B2 = SocketEnd(21, 22, sk="b1", peer_sk="b2"), SocketEnd(22, 21, sk="b2", peer_sk="b1")


def test_a_receive_is_the_send_queued_on_its_own_socket():
    q: SendQueue[str] = SendQueue()
    q.sent(A1, "f", "A's send")
    q.sent(B1, "f", "B's send")  # the same open file, over another socket, later
    assert q.received(B2, "f") == "B's send"  # not the oldest send of "f"
    assert q.received(A2, "f") == "A's send"
    assert not q


def test_sends_on_one_socket_are_taken_in_the_order_sent():
    q: SendQueue[int] = SendQueue()
    for i in range(3):
        q.sent(A1, "f", i)
    assert [q.received(A2, "f") for _ in range(3)] == [0, 1, 2]
    assert q.received(A2, "f") is None


def test_a_receive_of_another_file_or_on_another_socket_takes_nothing():
    q: SendQueue[str] = SendQueue()
    q.sent(A1, "f", "x")
    assert q.received(A2, "g") is None
    assert q.received(B2, "f") is None
    assert len(q) == 1


def test_a_send_freed_unreceived_leaves_by_its_sending_socket_only():
    q: SendQueue[str] = SendQueue()
    q.sent(A1, "f", "A's")
    q.sent(B1, "f", "B's")
    assert q.released("b1", 21, "f") == "B's"
    assert q.released("b1", 21, "f") is None
    assert q.received(A2, "f") == "A's"


def test_the_sending_socket_is_known_by_its_inode_where_its_sock_is_not():
    q: SendQueue[str] = SendQueue()
    q.sent(SocketEnd(11, 12), "f", "old recording")
    assert q.released("", 99, "f") is None
    assert q.received(SocketEnd(12, 11), "f") == "old recording"


def test_a_send_with_no_known_destination_is_taken_by_file_last():
    q: SendQueue[str] = SendQueue()
    q.sent(SocketEnd(31, sk="c1"), "f", "to an address")  # unconnected: no peer
    q.sent(A1, "f", "A's")
    assert q.received(A2, "f") == "A's"
    assert q.received(B2, "f") == "to an address"


def test_a_copy_is_independent():
    q: SendQueue[str] = SendQueue()
    q.sent(A1, "f", "x")
    frozen = q.copy()
    assert q.received(A2, "f") == "x"
    assert len(frozen) == 1 and list(frozen.items()) == [("f", ("x",))] and frozen != q
