import redis

from inspect_web.embedded_redis import ensure_embedded_redis, stop_embedded_redis


def test_it_starts_on_a_unix_socket_and_is_reused(tmp_path):
    first = ensure_embedded_redis(tmp_path)
    try:
        assert first.started
        assert first.socket == tmp_path / "redis.sock"
        client = redis.Redis.from_url(first.url)
        client.set("greeting", "hello")

        second = ensure_embedded_redis(tmp_path)
        assert not second.started
        assert second.pid == first.pid
        assert redis.Redis.from_url(second.url).get("greeting") == b"hello"
    finally:
        assert stop_embedded_redis(tmp_path)
    assert not stop_embedded_redis(tmp_path)


def test_a_stale_socket_left_by_a_dead_server_is_replaced(tmp_path):
    (tmp_path / "redis.sock").write_text("")  # what a killed server can leave behind
    started = ensure_embedded_redis(tmp_path)
    try:
        assert started.started
        assert redis.Redis.from_url(started.url).ping()
    finally:
        stop_embedded_redis(tmp_path)


def test_the_socket_is_private_to_its_owner(tmp_path):
    ensure_embedded_redis(tmp_path)
    try:
        assert (tmp_path / "redis.sock").stat().st_mode & 0o077 == 0
    finally:
        stop_embedded_redis(tmp_path)
