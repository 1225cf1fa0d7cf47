"""Travel planning: two agents fill disjoint slots of a day-by-day plan as strict JSON."""
