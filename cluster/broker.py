"""The Redis connection both sides keep beside Celery's: replies, a crawl's frontier, status."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis

# A broker restarted (a Redis upgrade, a reboot) is waited for rather than failing whatever was
# under way: commands are retried with a back-off of up to 2 s for about a minute in all.
RETRIES = 35


def redis_client(broker: str) -> "redis.Redis":
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(broker, socket_connect_timeout=5, health_check_interval=30,
                                retry=Retry(ExponentialBackoff(cap=2.0, base=0.1), RETRIES),
                                retry_on_error=[redis.ConnectionError, redis.TimeoutError])
