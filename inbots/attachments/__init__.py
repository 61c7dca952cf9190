"""A message's attachments: checked and stored in the send's transaction, listed with the
message (metadata only), read one at a time (``inbots.messages.attachments`` decides who may)."""
