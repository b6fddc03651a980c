# Journey (issue 57): see the docstring of mesh_root.py.
add_test(NAME journey_mesh_root
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/mesh_root.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events> --skew-states $<TARGET_FILE:skew_states>)
set_tests_properties(journey_mesh_root PROPERTIES LABELS journey TIMEOUT 180)
