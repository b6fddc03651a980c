# Journey (issue 57): see the docstring of state_root.py.
add_test(NAME journey_state_root
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/state_root.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events>)
set_tests_properties(journey_state_root PROPERTIES LABELS journey TIMEOUT 180)
