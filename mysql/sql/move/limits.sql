-- limits: a payload travels in one packet, so max_allowed_packet bounds it.
SELECT @@max_allowed_packet
