"""binlake's throughput benchmark (`make bench`, `python -m bench.run`); see bench/README.md."""
