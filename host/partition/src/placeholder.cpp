// partition library: replaced by the partitioner sources.
