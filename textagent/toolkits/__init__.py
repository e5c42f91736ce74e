"""Ready-made toolkits. ``textagent.toolkits.demo`` holds the tools of the seed scenarios
(calculate, get_time, get_weather, multiply, toggle_light); ``demo.demo_tools()`` returns them."""
