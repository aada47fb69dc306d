"""The web crawler (step 6): a polite crawler that feeds fetched pages to a ``PageSink``.

    sink.py       FetchedPage, KnownPage, PageSink (the boundary to the index), MemorySink
    crawler.py    CrawlSettings, Crawler, crawl(settings, sink) -> (CrawlStats, Crawler)
    frontier.py   per-site priority queues, politeness clock, seen-set, trap bounds
    fetch.py      httpx client, DNS cache with the private-address rule, size cap, redirects, outcomes
    robots.py     robots.txt per RFC 9309 (Protego), cached 24 h
    sitemaps.py   sitemaps and sitemap indexes, gzip;  feeds.py: RSS/Atom pull feeds (feedparser)
    freshness.py  Poisson change-rate estimate, expected age, age-minimising revisit schedule
    focus.py      topic classifier for focused crawling;  links.py: links and anchor texts (lxml)
    urls.py       normalisation, scope, shard by host hash;  stats.py: per-site counters, status
    config.py     the [crawl] table of the TOML config;  cli.py: add_commands() for ``deskdex crawl``
"""
