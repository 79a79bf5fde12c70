"""Reading Spark event logs: layouts and discovery, codecs, the tailing reader, file-system
events and the one record-reading loop. Imports nothing else from the Spark side."""
