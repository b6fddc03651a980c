# pithd without systemd: a missing control socket directory is made, or
# one line says which flag to use.
add_test(NAME journey_control_dir
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/control_dir.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>)
set_tests_properties(journey_control_dir PROPERTIES LABELS journey TIMEOUT 120)
