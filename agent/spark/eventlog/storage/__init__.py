"""Talking to the shared stores event logs live on (S3, GCS, Azure, HDFS): which file system
reads a URL (`filesystems`), each request bounded and counted (`calls`, `bounded` for the
blocking WebHDFS client), and listings a page at a time (`listings`). `stores` above them is
what the rest of the agent uses."""
