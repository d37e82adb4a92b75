from daemon.ratelimit import TokenBuckets


def test_burst_then_refill():
    now = [0.0]
    buckets = TokenBuckets(rate_per_s=30, burst=60, clock=lambda: now[0])
    assert all(buckets.take("k") == 0 for _ in range(60))
    assert buckets.take("k") == 1
    assert buckets.take("other") == 0
    now[0] += 0.5  # 15 tokens back
    assert sum(buckets.take("k") == 0 for _ in range(20)) == 15
