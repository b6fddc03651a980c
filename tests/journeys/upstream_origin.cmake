# A mirror whose bundles are redirected to a CDN on another origin: refused
# (503 "try again", the cause in status) until the operator lists the CDN
# with upstream_origin and reloads; then the record is served (issue 53).
add_test(NAME journey_upstream_origin
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/upstream_origin.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>)
set_tests_properties(journey_upstream_origin PROPERTIES LABELS journey TIMEOUT 120)
