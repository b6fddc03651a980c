# Journey (issue 51): see the docstring of cors.py.
add_test(NAME journey_cors
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/cors.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events> --out ${JOURNEY_OUT}/cors)
set_tests_properties(journey_cors PROPERTIES LABELS journey TIMEOUT 300 SKIP_RETURN_CODE 77)
