"""The folders here are test projects that end-to-end tests copy and run with pytester; the
outer test suite must not collect them itself."""
collect_ignore_glob = ["*"]
