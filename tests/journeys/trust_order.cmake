# Issue 54: one key trusted twice in two roles, the files in two orders:
# the same states; import names its refusals; a bad rotates_at stops it.
add_test(NAME journey_trust_order
         COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/trust_order.py $<TARGET_FILE:pithctl> ${JOURNEY_OUT})
set_tests_properties(journey_trust_order PROPERTIES LABELS journey TIMEOUT 60)
