"""The Spark driver of an application, seen from outside its JVM: where it listens (from the
log's environment), whether it is alive (its REST API, its sockets, /proc where readable) and
which process `job stop` signals. Works when the agent and Spark run as different users."""
