"""Settings for the benchmark's processes: the project's own, with the channel layer picked by
BENCH_CHANNEL_LAYER (`core` or `pubsub`) so that bench/stream.py can measure both in one run."""

import os

from inspect_web.settings import *  # noqa: F403
from inspect_web.settings import REDIS_URL

LAYERS = {
    "core": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 30},
    },
    "pubsub": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    },
}
CHANNEL_LAYERS = {"default": LAYERS[os.environ.get("BENCH_CHANNEL_LAYER", "pubsub")]}
