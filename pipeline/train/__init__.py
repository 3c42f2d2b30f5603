"""Training: the count stage, the counts files, the driver that runs the merge loop, the train job."""
