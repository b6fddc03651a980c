# SIGHUP with a changed config: a new trusted key takes effect, the log
# file is reopened after logrotate's move, the level changes, the node
# keeps serving; a config that does not parse keeps the running one.
add_test(NAME journey_reload
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/reload.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>)
set_tests_properties(journey_reload PROPERTIES LABELS journey TIMEOUT 120)
