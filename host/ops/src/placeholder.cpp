// ops library: replaced by the sampling sources.
