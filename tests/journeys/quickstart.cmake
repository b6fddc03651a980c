# The README's first command on the built tree (free ports, a temporary
# mesh directory): every node holds the sample record and its page answers
# 200 with its title; `quickstart.sh stop` leaves nothing running.
add_test(NAME journey_quickstart
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/quickstart.py
          --source ${PROJECT_SOURCE_DIR} --build ${PROJECT_BINARY_DIR})
set_tests_properties(journey_quickstart PROPERTIES
  LABELS journey TIMEOUT 300 SKIP_RETURN_CODE 77)
