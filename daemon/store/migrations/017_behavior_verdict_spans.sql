-- Scoring (issue 13): verdicts that score rules feed to behaviors are looked up by span, so a span
-- re-scored by a later job is not counted twice in a behavior's rate.
CREATE INDEX behavior_verdicts_span ON behavior_verdicts(behavior_id, span_id);
